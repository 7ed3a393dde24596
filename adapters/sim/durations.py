"""A heavy-tailed model of inner training job durations (SIMULATED workloads).

Most jobs cluster around a typical length (a lognormal body); a minority run far longer (a Pareto
tail: bigger models, more steps, slow envs); none runs past the job time budget, where the pod agent
kills it. The dispatcher never sees true durations, only noisy estimates (what a job's config lets
one predict), so scheduling policies are judged on what they could really know.

Kept free of fleet concepts so the outer-loop simulation can reuse it for episode timing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import msgspec

__all__ = ["DurationModel", "SimJob", "batched_arrivals", "make_jobs"]


class DurationModel(msgspec.Struct, frozen=True, kw_only=True):
    """Job wall time on a reference (speed 1.0) GPU, in seconds.

    The defaults are calibrated to the seed's headline arc: ~1,750 jobs used ~510 GPU-hours, i.e.
    a mean of ~17-18 minutes per job including pre/post evaluation.
    """

    median_s: float = 840.0  # body median (14 min)
    sigma: float = 0.5  # body lognormal shape
    tail_prob: float = 0.05  # share of jobs drawn from the tail
    tail_alpha: float = 1.6  # Pareto index (< 2: infinite variance before truncation)
    tail_start: float = 2.5  # the tail begins at tail_start * median_s
    min_s: float = 60.0  # setup + eval floor
    max_s: float = 3 * 3600.0  # the job time budget: the pod agent kills a job here
    estimate_sigma: float = 0.25  # lognormal error of a duration estimate (0: perfect foresight)

    def __post_init__(self) -> None:
        if not 0 < self.min_s <= self.median_s <= self.max_s:
            raise ValueError("DurationModel: need 0 < min_s <= median_s <= max_s")
        if self.sigma < 0 or self.estimate_sigma < 0:
            raise ValueError("DurationModel: sigma and estimate_sigma must be >= 0")
        if not 0 <= self.tail_prob <= 1:
            raise ValueError("DurationModel.tail_prob must be in [0, 1]")
        if self.tail_alpha <= 0 or self.tail_start <= 0:
            raise ValueError("DurationModel: tail_alpha and tail_start must be > 0")

    def sample(self, rng: random.Random) -> float:
        """One true duration."""
        if rng.random() < self.tail_prob:
            # Inverse-CDF Pareto draw; 1 - random() lies in (0, 1], so no division by zero.
            x = self.median_s * self.tail_start * float((1.0 - rng.random()) ** (-1.0 / self.tail_alpha))
        else:
            x = self.median_s * math.exp(self.sigma * rng.gauss(0.0, 1.0))
        return min(self.max_s, max(self.min_s, x))

    def estimate(self, true_s: float, rng: random.Random) -> float:
        """A noisy prediction of ``true_s`` (unbiased in log space), clipped to the model's range."""
        noisy = true_s * math.exp(self.estimate_sigma * rng.gauss(0.0, 1.0)) if self.estimate_sigma else true_s
        return min(self.max_s, max(self.min_s, noisy))


class SimJob(msgspec.Struct, frozen=True, kw_only=True):
    """One simulated job: its true work, the dispatcher's estimate of it, and when it is queued."""

    job_id: str
    work_s: float  # true duration on a speed-1.0 GPU
    estimate_s: float
    arrival_s: float = 0.0
    model: str = ""  # base model ("" = the default ladder's)


def make_jobs(
    n: int,
    model: DurationModel,
    seed: int,
    *,
    arrivals: Sequence[float] | None = None,
    models: Sequence[tuple[str, float]] = (),
) -> list[SimJob]:
    """``n`` jobs with durations from ``model``; all queued at t=0 unless ``arrivals`` gives each a time.

    ``models``: (base model, share) pairs; each job draws its model from them (none: every job has model "").
    Separate random streams for durations, estimates and models, so changing the estimate noise or the model
    mix leaves the true work identical (comparisons between policies stay paired).
    """
    if arrivals is not None and len(arrivals) != n:
        raise ValueError(f"make_jobs: {len(arrivals)} arrival times for {n} jobs")
    work_rng = random.Random(f"{seed}:durations")
    est_rng = random.Random(f"{seed}:estimates")
    model_rng = random.Random(f"{seed}:models")
    names, shares = [m for m, _ in models], [w for _, w in models]
    jobs = []
    for i in range(n):
        work = model.sample(work_rng)
        jobs.append(
            SimJob(
                job_id=f"j{i:05d}",
                work_s=work,
                estimate_s=model.estimate(work, est_rng),
                arrival_s=float(arrivals[i]) if arrivals is not None else 0.0,
                model=model_rng.choices(names, shares)[0] if names else "",
            )
        )
    return jobs


def batched_arrivals(n: int, batch_size: int, interval_s: float) -> list[float]:
    """Arrival times for ``n`` jobs released ``batch_size`` at a time every ``interval_s``."""
    if batch_size < 1 or interval_s < 0:
        raise ValueError("batched_arrivals: batch_size >= 1 and interval_s >= 0")
    return [(i // batch_size) * interval_s for i in range(n)]
