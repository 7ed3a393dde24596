"""benchmarks/outer_sim.py: the real OuterLoop on a virtual clock (sync, async, pacing)."""

from __future__ import annotations

import asyncio

import pytest

from adapters.sim.durations import DurationModel
from benchmarks.outer_sim import VirtualClockLoop, run_loop

FLAT = DurationModel(median_s=600.0, sigma=0.0, tail_prob=0.0, estimate_sigma=0.0)


def test_the_virtual_clock_jumps_to_the_next_timer() -> None:
    loop = VirtualClockLoop()
    try:
        loop.run_until_complete(asyncio.sleep(3 * 3600))
        assert loop.time() == pytest.approx(3 * 3600)
    finally:
        loop.close()


def test_sync_with_constant_jobs_is_exact() -> None:
    r = run_loop(mode="sync", steps=10, max_off=0, learner_s=100.0, agent_median_s=1e-9, model=FLAT)
    assert r.hours * 3600 == pytest.approx(10 * 700.0)
    assert r.trained_episodes == 400
    assert r.discarded_episodes == 0
    assert r.job_hours == pytest.approx(400 * 600 / 3600) and r.dropped_job_hours == 0.0  # every job, none dropped


def test_async_trains_exact_batches_and_respects_staleness() -> None:
    r = run_loop(mode="async", steps=30, seed=3, slots=64, max_off=2, min_fraction=1.0)
    assert r.trained_episodes == 30 * 40 and r.short_groups == 0
    assert 0.0 <= r.staleness_mean <= 2.0


def test_short_groups_train_with_at_least_their_minimum_and_discard_less() -> None:
    whole = run_loop(mode="whole", steps=40, seed=3, slots=40, min_fraction=1.0)
    short = run_loop(mode="short", steps=40, seed=3, slots=40, min_fraction=0.75)
    assert short.short_groups > 0
    # 5 groups a step, each whole (8) or closed short with at least 6 of 8
    assert 40 * 5 * 6 <= short.trained_episodes < 40 * 40
    assert 40 * 40 - short.trained_episodes <= 2 * short.short_groups  # at most 2 left out of a short group
    assert short.discarded_share < whole.discarded_share / 2
    assert short.staleness_mean <= 2.0
    # The stragglers dropped had jobs running: cancelled at the drop they cost less than run to their end.
    assert 0.0 < short.cancelled_job_hours < short.dropped_job_hours < short.job_hours
    assert 0.0 < short.saved_share < 0.5


def test_async_beats_sync_under_heavy_tails_and_pacing_discards_less() -> None:
    sync = run_loop(mode="sync", steps=60, seed=1, max_off=0)
    asyn = run_loop(mode="async", steps=60, seed=1, slots=64, max_off=2, pace=False)
    paced = run_loop(mode="paced", steps=60, seed=1, slots=64, max_off=2, pace=True)
    assert asyn.episodes_per_hour > 2 * sync.episodes_per_hour
    assert asyn.discarded_episodes > 0  # what pacing is for
    assert paced.discarded_share < asyn.discarded_share
    assert paced.episodes_per_hour >= asyn.episodes_per_hour * 0.95
