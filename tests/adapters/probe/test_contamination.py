"""The near-duplicate contamination check: honest tasks pass, lightly edited hidden items do not, and it is fast."""

from __future__ import annotations

import time

import pytest

from adapters.probe._contamination import NEAR_JACCARD, near_duplicates, shingles
from adapters.probe._tasks import hidden_shingles, judge_tasks
from families import FAMILIES, get_family, hidden_tasks


@pytest.mark.parametrize("name", list(FAMILIES))
def test_honest_train_tasks_are_never_near_a_hidden_item(name: str) -> None:
    family = get_family(name)
    items = [{"prompt": t.prompt, "answer": t.answer} for t in (family.generate("train", s) for s in range(1500))]
    report = near_duplicates(hidden_shingles(name), items)
    assert report.near == [] and report.overlap == 0.0


def _edited(prompt: str) -> str:
    # A light edit: one sentence added, whitespace and case changed.
    return "Please solve this carefully.  " + prompt.upper()


@pytest.mark.parametrize("name", list(FAMILIES))
def test_lightly_edited_hidden_items_are_caught_with_the_overlap_figure(name: str) -> None:
    hidden = hidden_tasks(get_family(name))
    honest = [
        {"prompt": t.prompt, "answer": t.answer} for t in (get_family(name).generate("train", s) for s in range(40))
    ]
    leaked = [{"prompt": _edited(t.prompt), "answer": f" {t.answer} "} for t in hidden[:10]]
    report = near_duplicates(hidden_shingles(name), honest + leaked)
    assert sorted(k for k, _, _ in report.near) == list(range(40, 50))
    assert report.overlap == pytest.approx(10 / 50)
    # (The honest tasks stay out here: the exact normalised-prompt check flags template-identical prompts.)
    ok, detail = judge_tasks({"items": leaked, "fields": {"answer": "str"}, "data_types": ["T"]}, name, 1)
    assert not ok and "contamination: 10 of 10 tasks (100.00%)" in detail


def test_the_same_prompt_with_another_answer_is_not_a_near_duplicate() -> None:
    hidden = hidden_tasks(get_family("calc_chain"))
    items = [{"prompt": _edited(t.prompt), "answer": "not " + t.answer} for t in hidden[:5]]
    assert near_duplicates(hidden_shingles("calc_chain"), items).near == []


def test_shingles_ignore_case_and_spacing() -> None:
    assert shingles("A b  c d e f") == shingles("a B c d e\nF")
    assert len(shingles("short one")) == 1 and NEAR_JACCARD > 0.8


def test_twenty_thousand_tasks_take_under_a_few_seconds() -> None:
    family = get_family("triage")
    base = [family.generate("train", s) for s in range(500)]
    items = [{"prompt": t.prompt, "answer": t.answer} for t in base] * 40
    index = hidden_shingles("triage")
    # CPU time of this process, not wall time: a busy machine must not fail a check of the algorithm's cost
    started = time.process_time()
    near_duplicates(index, items)
    assert time.process_time() - started < 5.0
