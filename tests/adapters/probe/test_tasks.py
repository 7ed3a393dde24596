"""The tasks check: counts, the typed answer, and hidden eval items caught engine-side."""

from __future__ import annotations

from typing import Any

from adapters.probe._contamination import near_duplicates
from adapters.probe._tasks import hidden_matches, hidden_shingles, judge_tasks
from families import get_family, hidden_tasks


def _reply(rows: list[tuple[str, str | None]], fields: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "items": [{"prompt": p, "answer": a} for p, a in rows],
        "fields": {"answer": "str"} if fields is None else fields,
        "data_types": ["CalcData"],
        **kw,
    }


def _train_rows(n: int) -> list[tuple[str, str | None]]:
    family = get_family("calc_chain")
    return [(t.prompt, t.answer) for t in (family.generate("train", s) for s in range(n))]


def test_enough_typed_clean_tasks_pass() -> None:
    ok, detail = judge_tasks(_reply(_train_rows(40)), "calc_chain", 32)
    assert ok and "40 tasks loaded" in detail


def test_too_few_tasks_fail_unless_the_taskset_is_endless() -> None:
    ok, detail = judge_tasks(_reply(_train_rows(5)), "calc_chain", 32)
    assert not ok and "only 5 tasks; at least 32" in detail
    ok, _ = judge_tasks(_reply(_train_rows(5), truncated=True), "calc_chain", 32)
    assert ok


def test_untyped_or_empty_answers_fail() -> None:
    ok, detail = judge_tasks(_reply(_train_rows(40), fields={"world": "dict"}), "calc_chain", 32)
    assert not ok and "no typed `answer` field" in detail
    rows = _train_rows(40)
    rows[7] = (rows[7][0], "")
    ok, detail = judge_tasks(_reply(rows), "calc_chain", 32)
    assert not ok and "1 tasks have an empty answer (first: task #7)" in detail


def test_hidden_items_are_caught_by_fingerprint_and_by_normalised_prompt() -> None:
    hidden = hidden_tasks(get_family("calc_chain"))
    rows = _train_rows(40)
    rows[3] = (hidden[0].prompt, hidden[0].answer)  # exact hidden item
    rows[9] = ("  " + hidden[1].prompt.upper() + " ", "not its answer")  # its prompt, reformatted
    assert hidden_matches("calc_chain", _reply(rows)["items"]) == [3, 9]
    ok, detail = judge_tasks(_reply(rows), "calc_chain", 32)
    assert not ok and "2 of 40 tasks equal items of the hidden eval set" in detail and "#3" in detail


def test_train_split_never_matches_the_hidden_set() -> None:
    for name in ("calc_chain", "ledger", "string_pipeline"):
        family = get_family(name)
        items = [{"prompt": t.prompt, "answer": t.answer} for t in (family.generate("train", s) for s in range(50))]
        assert hidden_matches(name, items) == []


def test_templated_families_compare_prompt_and_answer_so_honest_equal_prompts_pass() -> None:
    """multi_hop, dispatch and triage reuse prompt texts (the answer lives in the world): an honest train task
    whose prompt equals a hidden prompt passes; a copied hidden item (prompt and answer) does not."""
    for name in ("multi_hop", "dispatch", "triage"):
        family = get_family(name)
        assert family.prompt_is_template
        hidden = hidden_tasks(family)
        hidden_prompts = {t.prompt for t in hidden}
        train = [family.generate("train", s) for s in range(3000)]
        same_prompt = [t for t in train if t.prompt in hidden_prompts]
        assert same_prompt, f"{name}: expected honest train prompts equal to hidden ones"
        items = [{"prompt": t.prompt, "answer": t.answer} for t in same_prompt]
        assert hidden_matches(name, items) == []  # same words, another world, another answer
        assert near_duplicates(hidden_shingles(name), items).near == []
        copied = {"prompt": "  " + hidden[5].prompt.upper(), "answer": hidden[5].answer.lower() + " "}
        assert hidden_matches(name, [*items, copied]) == [len(items)]
    for name in ("calc_chain", "string_pipeline", "ledger"):  # the prompt identifies the task there
        assert not get_family(name).prompt_is_template
