"""The rewards projection and the mean-reward decomposition."""

from __future__ import annotations

import pytest

from events import Recorded
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward
from handlers.reward.projection import RewardsProjection, breakdown

C = RewardConfig()


def test_fold_keeps_the_latest_reward_per_episode_and_breakdown_adds_up() -> None:
    ok = compute_reward(
        RewardInputs(
            episode_id="a",
            parseable=True,
            attempts=1,
            validated=True,
            job_status="succeeded",
            post=0.8,
            best_pre=0.742,
            train_seconds=1200,
            time_budget_s=3600,
        ),
        C,
    )
    dead = compute_reward(
        RewardInputs(episode_id="b", parseable=True, attempts=2, validated=True, job_status="failed"), C
    )
    none = compute_reward(RewardInputs(episode_id="c", parseable=False, attempts=0, validated=False), C)
    redo = compute_reward(
        RewardInputs(episode_id="b", parseable=True, attempts=1, validated=True, job_status="failed"), C
    )
    state = RewardsProjection().fold(Recorded(i, 0.0, r) for i, r in enumerate([ok, dead, none, redo]))
    assert sorted(state) == ["a", "b", "c"] and state["b"] == redo
    b = breakdown(state.values())
    assert b.episodes == 3
    assert b.outcomes == {"job_failed": 1, "no_submission": 1, "scored": 1}
    assert b.reward == pytest.approx((ok.reward + redo.reward + none.reward) / 3)
    assert b.reward == pytest.approx(b.validation + b.quality + b.speed + b.penalty)
    assert b.penalty == pytest.approx(-0.1 / 3)
    assert breakdown([]).episodes == 0
