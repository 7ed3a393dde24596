"""The rewards of a run, by episode, folded from ``reward.computed``; and their decomposition for reports.

A later ``reward.computed`` for the same episode (a recomputation) replaces the earlier one. Importing this
module also imports :mod:`handlers.reward.formula`, which registers the ``replay --verify`` deriver of rewards.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

import handlers.reward.formula  # noqa: F401  (registers the reward deriver for replay --verify)
from engine.projection import Projection, handles
from events import RewardComputed

__all__ = ["RewardBreakdown", "RewardsProjection", "breakdown"]


class RewardsProjection(Projection[dict[str, RewardComputed]]):
    name = "rewards"
    state_type = dict[str, RewardComputed]

    def initial(self) -> dict[str, RewardComputed]:
        return {}

    @handles(RewardComputed)
    def _computed(self, state: dict[str, RewardComputed], e: RewardComputed) -> dict[str, RewardComputed]:
        state[e.episode_id] = e
        return state


class RewardBreakdown(msgspec.Struct, frozen=True, kw_only=True):
    """Mean reward and its weighted parts over some episodes: ``reward == validation + quality + speed``
    except for the share of no-submission episodes, whose whole reward is the penalty (``penalty``)."""

    episodes: int
    reward: float
    validation: float  # mean of w_validation * validation
    quality: float  # mean of w_quality * quality
    speed: float  # mean of w_speed * speed
    penalty: float  # mean of the no-submission reward (0 for other episodes)
    outcomes: dict[str, int]


def breakdown(rewards: Iterable[RewardComputed]) -> RewardBreakdown:
    """Decompose the mean reward into its weighted components (what the seed's "rungs" plot shows)."""
    rs = list(rewards)
    n = len(rs) or 1
    outcomes: dict[str, int] = {}
    for r in rs:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    return RewardBreakdown(
        episodes=len(rs),
        reward=sum(r.reward for r in rs) / n,
        validation=sum(r.w_validation * r.validation for r in rs) / n,
        quality=sum(r.w_quality * r.quality for r in rs) / n,
        speed=sum(r.w_speed * r.speed for r in rs) / n,
        penalty=sum(r.reward for r in rs if r.outcome == "no_submission") / n,
        outcomes=dict(sorted(outcomes.items())),
    )
