from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.training import SampledTurn, group_advantages, trajectory_to_datums


def turn(prompt, sampled, lps=None):
    return SampledTurn(
        prompt_tokens=list(prompt),
        sampled_tokens=list(sampled),
        sampled_logprobs=list(lps if lps is not None else [-0.5] * len(sampled)),
    )


def test_single_turn_alignment():
    [d] = trajectory_to_datums([turn([1, 2, 3], [4, 5], [-0.1, -0.2])], advantage=0.7)
    assert d.input_tokens == [1, 2, 3, 4]
    assert d.target_tokens == [2, 3, 4, 5]
    # position i predicts target i: the sampled tokens 4, 5 are targets at positions 2, 3
    assert d.logprobs == [0.0, 0.0, -0.1, -0.2]
    assert d.advantages == [0.0, 0.0, 0.7, 0.7]
    assert d.mask == [0.0, 0.0, 1.0, 1.0]


def test_prefix_extending_turns_share_a_datum():
    t1 = turn([1, 2], [3, 4])
    t2 = turn([1, 2, 3, 4, 9, 9], [5])  # history + tool result + new sample
    [d] = trajectory_to_datums([t1, t2], advantage=1.0)
    assert [*d.input_tokens, d.target_tokens[-1]] == [1, 2, 3, 4, 9, 9, 5]
    assert d.mask == [0, 1, 1, 0, 0, 1]


def test_non_extending_turn_starts_a_new_datum():
    t1 = turn([1, 2], [3, 4])
    t2 = turn([1, 2, 7, 9], [5])  # the template rewrote the previous reply
    ds = trajectory_to_datums([t1, t2], advantage=-0.5)
    assert len(ds) == 2
    assert ds[1].input_tokens == [1, 2, 7, 9]
    assert ds[1].target_tokens == [2, 7, 9, 5]
    assert ds[1].advantages == [0, 0, 0, -0.5]


def test_mismatched_logprobs_refused():
    with pytest.raises(ValueError, match="logprobs"):
        turn([1], [2, 3], [-0.1])


@st.composite
def trajectories(draw):
    turns = []
    history: list[int] = []
    for _ in range(draw(st.integers(1, 4))):
        extend = draw(st.booleans()) and bool(history)
        obs = draw(st.lists(st.integers(0, 50), min_size=1, max_size=5))
        prompt = history + obs if extend else obs + draw(st.lists(st.integers(0, 50), max_size=3))
        sampled = draw(st.lists(st.integers(0, 50), min_size=1, max_size=5))
        lps = draw(st.lists(st.floats(-5, 0), min_size=len(sampled), max_size=len(sampled)))
        turns.append(turn(prompt, sampled, lps))
        history = prompt + sampled
    return turns


@given(trajectories(), st.floats(-2, 2))
def test_every_sampled_token_trained_exactly_once(turns, adv):
    ds = trajectory_to_datums(turns, adv)
    for d in ds:
        n = len(d.input_tokens)
        assert len(d.target_tokens) == len(d.logprobs) == len(d.advantages) == len(d.mask) == n
        assert d.input_tokens[1:] == d.target_tokens[:-1]  # one shifted sequence
        for lp, a, m in zip(d.logprobs, d.advantages, d.mask, strict=True):
            if m == 0:
                assert lp == 0 and a == 0
            else:
                assert a == adv
    trained = [t for d in ds for t, m in zip(d.target_tokens, d.mask, strict=True) if m]
    assert trained == [t for tr in turns for t in tr.sampled_tokens]
    lps = [lp for d in ds for lp, m in zip(d.logprobs, d.mask, strict=True) if m]
    assert lps == [lp for tr in turns for lp in tr.sampled_logprobs]


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=16))
def test_advantages_are_centred(rewards):
    advs = group_advantages(rewards)
    assert abs(sum(advs)) < 1e-9 * max(1, len(rewards))
    # a shift of the rewards: differences between episodes are kept exactly
    for r, a in zip(rewards, advs, strict=True):
        assert abs((r - rewards[0]) - (a - advs[0])) < 1e-9


def test_advantages_empty_group_refused():
    with pytest.raises(ValueError):
        group_advantages([])
