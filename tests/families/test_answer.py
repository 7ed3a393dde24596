"""Reading the final reply: the <answer> tag, the bare-reply fallback, and normalisation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from families import extract_answer, normalise_number, normalise_text

plain = st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=30)


def test_extract_answer():
    assert extract_answer("Let me see.\n<answer> 42 </answer>") == "42"
    assert extract_answer("<answer>1</answer> wait, no: <answer>2</answer>") == "2"  # the last one counts
    assert extract_answer("<think>maybe 7</think>\n  12 \n") == "12"
    assert extract_answer("<ANSWER>x</ANSWER>") == "x"
    assert extract_answer("<answer>multi\nline</answer>") == "multi\nline"
    assert extract_answer("") == ""


@given(plain, plain, plain)
def test_tagged_answer_is_found_whatever_surrounds_it(before, inside, after):
    assert extract_answer(f"{before}<answer>{inside}</answer>{after}") == inside.strip()


def test_normalise():
    assert normalise_text('  "PmalOX". ') == "PmalOX"
    assert normalise_text("`a  b`") == "a b"
    assert normalise_number("1,200") == "1200"
    assert normalise_number("+7") == normalise_number("7.0") == "7"
    assert normalise_number("-3") == "-3"
    assert normalise_number("seven") == "seven"
    assert normalise_number("2.5") == "2.5"


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_numbers_in_many_spellings_agree(n):
    forms = [str(n), f"{n:,}", f" {n} ", f"{n}.0", f'"{n}"', f"{n}."]
    assert {normalise_number(f) for f in forms} == {str(n)}


@given(plain)
def test_normalisation_is_idempotent(s):
    assert normalise_text(normalise_text(s)) == normalise_text(s)
    assert normalise_number(normalise_number(s)) == normalise_number(s)
