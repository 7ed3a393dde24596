from __future__ import annotations

from adapters.sim.durations import DurationModel
from benchmarks.outer_sim import run_async, run_sync

FLAT = DurationModel(median_s=600.0, sigma=0.0, tail_prob=0.0, estimate_sigma=0.0)


def test_sync_with_constant_jobs_is_exact():
    r = run_sync(steps=10, learner_s=100.0, agent_median_s=1e-9, model=FLAT)
    assert r.hours * 3600 == __import__("pytest").approx(10 * 700.0)
    assert r.trained_episodes == 400


def test_async_trains_exact_batches_and_respects_staleness():
    r = run_async(steps=30, seed=3, slots=80, max_off=2)
    assert r.trained_episodes == 30 * 40
    assert 0.0 <= r.staleness_mean <= 2.0


def test_async_beats_sync_under_heavy_tails_and_zero_staleness_discards_more():
    sync = run_sync(steps=60, seed=1)
    asyn = run_async(steps=60, seed=1, slots=40, max_off=2)
    assert asyn.episodes_per_hour > sync.episodes_per_hour
    strict = run_async(steps=60, seed=1, slots=40, max_off=0)
    assert strict.discarded_episodes >= asyn.discarded_episodes
