"""Plain indexes over the golden run's raw records: the tests' oracle, computed without any projection."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from engine.log import read_log
from events import BatchCollected, EpisodeStarted, Recorded, RewardComputed
from tests.golden.make_run_log import OUT

GOLDEN_EVENTS = OUT / "events.jsonl"


@cache
def golden_records() -> tuple[Recorded, ...]:
    return tuple(read_log(GOLDEN_EVENTS).records)


def of_type(records: Sequence[Recorded], cls: type) -> list:
    return [r.event for r in records if isinstance(r.event, cls)]


def rewards_by_episode(records: Sequence[Recorded]) -> dict[str, RewardComputed]:
    return {e.episode_id: e for e in of_type(records, RewardComputed)}


def step_episodes(records: Sequence[Recorded]) -> dict[int, list[str]]:
    """Outer step -> the episode ids its batch.collected lists."""
    return {e.step: list(e.episode_ids) for e in of_type(records, BatchCollected)}


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def holdout_arms(records: Sequence[Recorded]) -> dict[int, list[RewardComputed]]:
    """Sampler version -> rewards of the triage (held-out) episodes that ran with it."""
    rewards = rewards_by_episode(records)
    arms: dict[int, list[RewardComputed]] = {}
    for e in of_type(records, EpisodeStarted):
        if e.family == "triage" and e.episode_id in rewards:
            arms.setdefault(e.sampler_version, []).append(rewards[e.episode_id])
    return arms
