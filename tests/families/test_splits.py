"""Seeded split generators and the fingerprint-rejection construction, on a toy generator."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from families import Task, draw_disjoint, fingerprint, split_rng
from families._splits import MAX_REDRAWS


def toy(rng) -> Task:
    n = rng.randint(0, 9)  # a deliberately tiny task space: collisions with "hidden" are common
    return Task(id="toy", family="toy", prompt=f"say {n}", answer=str(n))


@given(st.sampled_from(["train", "dev", "hidden"]), st.integers(0, 2**63), st.integers(0, 5))
def test_split_rng_is_a_pure_function_of_its_key(split, seed, attempt):
    a = split_rng("fam", split, seed, attempt).random()
    assert a == split_rng("fam", split, seed, attempt).random()
    assert a != split_rng("fam", split, seed, attempt + 1).random()
    assert a != split_rng("other", split, seed, attempt).random()


def test_unknown_split():
    with pytest.raises(ValueError, match="unknown split"):
        split_rng("fam", "test", 0)


def test_fingerprint_ignores_id_and_world_but_not_prompt_or_answer():
    t = Task(id="a", family="f", prompt="p", answer="1", world={"x": 1})
    assert fingerprint(t) == fingerprint(Task(id="b", family="f", prompt="p", answer="1", world={"x": 2}))
    assert fingerprint(t) != fingerprint(Task(id="a", family="f", prompt="q", answer="1"))
    assert fingerprint(t) != fingerprint(Task(id="a", family="f", prompt="p", answer="2"))


def test_rejection_keeps_train_off_the_hidden_set():
    hidden = frozenset(fingerprint(draw_disjoint(toy, "toy", "hidden", s, frozenset)) for s in range(5))
    assert 2 <= len(hidden) <= 5
    drawn = [draw_disjoint(toy, "toy", "train", s, lambda: hidden) for s in range(500)]
    assert not [t for t in drawn if fingerprint(t) in hidden]
    # Without the rejection the same seeds would have hit the hidden set often.
    raw = [toy(split_rng("toy", "train", s)) for s in range(500)]
    assert sum(fingerprint(t) in hidden for t in raw) > 50


def test_hidden_split_is_never_filtered_and_degenerate_generators_fail_loudly():
    every = frozenset(fingerprint(Task(id="t", family="toy", prompt=f"say {n}", answer=str(n))) for n in range(10))
    assert draw_disjoint(toy, "toy", "hidden", 3, lambda: every).prompt.startswith("say")
    with pytest.raises(RuntimeError, match=f"{MAX_REDRAWS} draws in a row"):
        draw_disjoint(toy, "toy", "train", 3, lambda: every)
