"""Staleness accounting: a group sampled with version ``v`` may train at step ``s`` only if
``s - v <= max_steps_off_policy``; otherwise its episodes are discarded and its task re-queued.

Whole groups, not single episodes: the advantage baseline is the group mean. The one exception is a group
closed short at its last fresh step (handlers/training/loop.py): it trains with the episodes that finished, at
least ``[outer] min_group_fraction`` of them, and its baseline is their mean; that estimator leans towards the
faster episodes, which is the price of not discarding the whole group for one straggler.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from handlers.training.episodes import EpisodeGroup

__all__ = ["StalenessSplit", "is_fresh", "split_by_staleness"]


class StalenessSplit(msgspec.Struct, frozen=True, kw_only=True):
    fresh: list[EpisodeGroup]
    stale: list[EpisodeGroup]


def is_fresh(step: int, sampler_version: int, max_steps_off_policy: int) -> bool:
    if sampler_version > step:
        raise ValueError(f"sampler version {sampler_version} is newer than step {step}")
    return step - sampler_version <= max_steps_off_policy


def split_by_staleness(groups: Sequence[EpisodeGroup], step: int, max_steps_off_policy: int) -> StalenessSplit:
    """Groups that may train at ``step`` (oldest sampler first, so the stalest train while still allowed)."""
    fresh = [g for g in groups if is_fresh(step, g.sampler_version, max_steps_off_policy)]
    stale = [g for g in groups if not is_fresh(step, g.sampler_version, max_steps_off_policy)]
    fresh.sort(key=lambda g: g.sampler_version)
    return StalenessSplit(fresh=fresh, stale=stale)
