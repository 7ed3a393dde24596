"""The reusable job-duration model: range, heavy tail, seeded workloads, estimate noise."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.sim import DurationModel, batched_arrivals, make_jobs


@given(seed=st.integers(0, 2**32), tail=st.floats(0, 1), sigma=st.floats(0, 3), alpha=st.floats(0.3, 5))
def test_samples_and_estimates_stay_within_the_job_time_budget(
    seed: int, tail: float, sigma: float, alpha: float
) -> None:
    model = DurationModel(tail_prob=tail, sigma=sigma, tail_alpha=alpha, estimate_sigma=sigma)
    rng = random.Random(seed)
    for _ in range(20):
        x = model.sample(rng)
        assert model.min_s <= x <= model.max_s
        assert model.min_s <= model.estimate(x, rng) <= model.max_s


def test_the_tail_is_heavy() -> None:
    body_only = DurationModel(tail_prob=0.0)
    heavy = DurationModel()
    rng_a, rng_b = random.Random(1), random.Random(1)
    a = [body_only.sample(rng_a) for _ in range(20_000)]
    b = [heavy.sample(rng_b) for _ in range(20_000)]
    far = heavy.median_s * heavy.tail_start * 2
    assert sum(x > far for x in a) < 20  # a lognormal body almost never gets there
    assert sum(x > far for x in b) > 200  # the Pareto tail regularly does
    assert any(x == heavy.max_s for x in b)  # and some jobs hit the time budget
    assert statistics.median(b) == pytest.approx(heavy.median_s, rel=0.1)


def test_default_mean_matches_the_seed_arc() -> None:
    # ~510 GPU-hours over ~1,750 jobs in the seed write-up: ~17.5 min per job.
    jobs = make_jobs(1750, DurationModel(), seed=0)
    mean_min = statistics.fmean(j.work_s for j in jobs) / 60
    assert 14 <= mean_min <= 22


def test_workloads_are_seeded_and_estimates_do_not_change_the_work() -> None:
    a = make_jobs(50, DurationModel(), seed=3)
    assert a == make_jobs(50, DurationModel(), seed=3)
    assert [j.work_s for j in a] != [j.work_s for j in make_jobs(50, DurationModel(), seed=4)]
    exact = make_jobs(50, DurationModel(estimate_sigma=0.0), seed=3)
    noisy = make_jobs(50, DurationModel(estimate_sigma=1.0), seed=3)
    assert [j.work_s for j in exact] == [j.work_s for j in noisy] == [j.work_s for j in a]
    assert all(j.estimate_s == j.work_s for j in exact)
    assert any(j.estimate_s != j.work_s for j in noisy)
    assert len({j.job_id for j in a}) == 50


def test_arrivals() -> None:
    assert batched_arrivals(5, 2, 10.0) == [0.0, 0.0, 10.0, 10.0, 20.0]
    jobs = make_jobs(5, DurationModel(), seed=0, arrivals=batched_arrivals(5, 2, 10.0))
    assert [j.arrival_s for j in jobs] == [0.0, 0.0, 10.0, 10.0, 20.0]
    with pytest.raises(ValueError, match="arrival"):
        make_jobs(3, DurationModel(), seed=0, arrivals=[0.0])


@pytest.mark.parametrize(
    "kwargs", [{"min_s": 0.0}, {"median_s": 10.0, "min_s": 60.0}, {"tail_prob": 1.5}, {"tail_alpha": 0.0}]
)
def test_model_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="DurationModel"):
        DurationModel(**kwargs)  # type: ignore[arg-type]
