"""calc_chain: the prompt alone determines the answer, and the tools do integer arithmetic."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from families import Difficulty, get_family, hidden_tasks

FAMILY = get_family("calc_chain")


def answer_from_prompt(prompt: str) -> int:
    """An independent reading of the prompt text: no generator internals."""
    names = dict(re.findall(r"(\w) = (\d+)", prompt.split("Start with")[0]))

    def val(tok: str) -> int:
        return int(names[tok]) if tok in names else int(tok)

    value = val(re.search(r"Start with (\w+)\.", prompt).group(1))
    for verb, tok in re.findall(r"(Add|Subtract|Multiply by|Divide by) (\w+)\.", prompt):
        k = val(tok)
        if verb == "Divide by":
            assert value % k == 0, "divisions must be exact"
        value = {"Add": value + k, "Subtract": value - k, "Multiply by": value * k, "Divide by": value // k}[verb]
        assert 0 <= value <= 999
    return value


def test_hidden_answers_follow_from_the_prompt():
    for task in hidden_tasks(FAMILY):
        assert str(answer_from_prompt(task.prompt)) == task.answer, task.prompt


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 8), distractors=st.integers(0, 4))
def test_any_task_answer_follows_from_prompt(seed, steps, distractors):
    task = FAMILY.generate("train", seed, Difficulty(steps=steps, distractors=distractors))
    assert str(answer_from_prompt(task.prompt)) == task.answer
    ops = re.findall(r"(Add|Subtract|Multiply by|Divide by) ", task.prompt)
    assert len(ops) == steps
    # Distractors are defined but unused: count the names that never appear after "Start with".
    defined = re.findall(r"(\w) = \d+", task.prompt.split("Start with")[0])
    used = set(re.findall(r"\b([a-z])\b", task.prompt.split("Start with")[1]))
    assert len([n for n in defined if n not in used]) == distractors


def test_default_mix_spans_the_documented_range():
    diffs = [t.difficulty for t in hidden_tasks(FAMILY)]
    assert {d["steps"] for d in diffs} == {2, 3, 4, 5}
    assert {d["distractors"] for d in diffs} == {0, 1, 2}


def test_tools():
    box = FAMILY.tools(hidden_tasks(FAMILY)[0])
    assert box.call("add", {"a": 2, "b": 3}) == "5"
    assert box.call("sub", {"a": 2, "b": 3}) == "-1"
    assert box.call("mul", {"a": 4, "b": 3}) == "12"
    assert box.call("div", {"a": 12, "b": 4}) == "3"
    assert box.call("div", {"a": 7, "b": 2}) == "3.5"
    assert box.call("div", {"a": 7, "b": 0}).startswith("error: division by zero")
    assert box.call("add", {"a": "2", "b": 3.0}) == "5"  # lax like the served tools
    assert box.call("add", {"a": "two", "b": 3}).startswith("error: argument 'a' must be an integer")


def test_numeric_answers_compare_by_value():
    task = hidden_tasks(FAMILY)[0]
    n = int(task.answer)
    assert FAMILY.score(task, f"<answer> {n:,} </answer>") == 1.0
    assert FAMILY.score(task, f"The result is {n}.") == 0.0  # prose without the tag is not an answer
    assert FAMILY.score(task, f"<answer>{n}.0</answer>") == 1.0
