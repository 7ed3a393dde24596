"""SFT traces: clean ones solve the task; noisy ones make one mistake, with the real tools' results."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.tiny.thoughts import TOKENIZER_NOTE_FAMILIES
from adapters.tiny.traces import NOISE_FAMILIES, noisy_trace, reference_trace, solution_messages, trace_messages
from families import FAMILIES, SYSTEM_PROMPT, get_family


def _replay(family, task, messages):
    """Run every tool call of the conversation on fresh tools: results must match what the trace shows."""
    box = family.tools(task)
    pending = {}
    for m in messages:
        for call in m.get("tool_calls") or []:
            pending[call["id"]] = call["function"]
        if m["role"] == "tool":
            fn = pending.pop(m["tool_call_id"])
            assert box.call(fn["name"], json.loads(fn["arguments"])) == m["content"]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_clean_trace_is_the_reference_solution(name):
    fam = get_family(name)
    task = fam.generate("train", 11)
    messages = solution_messages(task, fam.solve(task))
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert messages[1]["content"] == task.prompt
    assert fam.score(task, messages[-1]["content"]) == 1.0
    _replay(fam, task, messages)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(NOISE_FAMILIES)), seed=st.integers(0, 10_000), rng_seed=st.integers(0, 1000))
def test_noisy_trace_is_wrong_but_self_consistent(name, seed, rng_seed):
    fam = get_family(name)
    task = fam.generate("train", seed)
    steps, notes = noisy_trace(fam, task, random.Random(rng_seed))
    messages = solution_messages(task, steps, notes)
    assert messages[1]["content"] == task.prompt  # the conversation shows the real task
    _replay(fam, task, messages)  # every shown tool result is what the real tool returns for that call
    clean = list(fam.solve(task))
    if steps != clean:  # the (rare) fallback is the clean solution
        assert fam.score(task, messages[-1]["content"]) == 0.0


def test_noise_rate_is_respected_and_noise_is_usually_found():
    fam = get_family("calc_chain")
    rng = random.Random(0)
    wrong = 0
    for seed in range(200):
        task = fam.generate("train", seed)
        wrong += fam.score(task, trace_messages(fam, task, rng, noise=0.4)[-1]["content"]) == 0.0
    assert 0.3 < wrong / 200 < 0.5


def _pieces(note: str) -> list[str]:
    return [p.strip().rstrip(".") for p in note.split(". ") if p.strip()]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(TOKENIZER_NOTE_FAMILIES)), seed=st.integers(0, 10_000))
def test_clean_notes_quote_the_prompt(name, seed):
    """Every sentence of a clean trace's note is copied from the prompt (instructions and named values)."""
    fam = get_family(name)
    task = fam.generate("train", seed)
    steps, notes = reference_trace(fam, task)
    assert notes is not None and len(notes) == sum(s.tool is not None for s in steps)
    for note in notes:
        for piece in _pieces(note):
            assert piece in task.prompt, (piece, task.prompt)
    messages = solution_messages(task, steps, notes)
    assert [m["content"] for m in messages if m.get("tool_calls")] == notes


def test_families_without_notes_get_plain_calls():
    fam = get_family("multi_hop")
    task = fam.generate("train", 0)
    steps, notes = reference_trace(fam, task)
    assert notes is None
    assert all(m["content"] == "" for m in solution_messages(task, steps, notes) if m.get("tool_calls"))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_triage_notes_carry_the_comparison_and_end_with_the_answer(seed):
    """One note per call plus one before the answer; every id and time a note names was shown before it."""
    fam = get_family("triage")
    task = fam.generate("train", seed)
    steps, notes = reference_trace(fam, task)
    assert notes is not None and len(notes) == sum(s.tool is not None for s in steps) + 1
    messages = solution_messages(task, steps, notes)
    assert fam.score(task, messages[-1]["content"]) == 1.0
    assert messages[-1]["content"].startswith(notes[-1] + "\n<answer>")
    assert steps[-1].answer in notes[-1]
    seen = task.prompt
    for m in messages[2:]:
        if m["role"] == "assistant":
            for token in re.findall(r"D-\d+|\d\d:\d\d|INC-\d+", m["content"]):
                assert token in seen, (token, m["content"])
        seen += m["content"]
    _replay(fam, task, messages)


def test_note_families_filter_leaves_the_others_plain():
    fam = get_family("triage")
    task = fam.generate("train", 3)
    assert reference_trace(fam, task)[1] is not None
    assert reference_trace(fam, task, TOKENIZER_NOTE_FAMILIES)[1] is None
    messages = trace_messages(fam, task, random.Random(0), 0.0, TOKENIZER_NOTE_FAMILIES)
    assert messages[-1]["content"].startswith("<answer>")
