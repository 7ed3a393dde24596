"""Yardsticks for a simulated schedule: the makespan lower bound.

On ``m`` identical pods of speed ``s`` with every job queued at t=0, no schedule finishes before
``max(longest job, total work / m) / s``. With release times (jobs queued later) the bound also
considers each release time ``r``: nothing released at or after ``r`` can finish before
``r + (work released at or after r) / (m * s)``, nor any job before its release plus its own length.
"""

from __future__ import annotations

from collections.abc import Sequence

from .durations import SimJob

__all__ = ["lower_bound_s"]


def lower_bound_s(jobs: Sequence[SimJob], pods: int, speed: float = 1.0) -> float:
    """A lower bound on the makespan of ``jobs`` on ``pods`` pods of relative ``speed``."""
    if pods < 1 or speed <= 0:
        raise ValueError("lower_bound_s: pods >= 1 and speed > 0")
    if not jobs:
        return 0.0
    bound = max(j.arrival_s + j.work_s / speed for j in jobs)
    # Sweep release times from the latest back, accumulating the work released at or after each.
    ordered = sorted(jobs, key=lambda j: j.arrival_s, reverse=True)
    suffix = 0.0
    i = 0
    while i < len(ordered):
        r = ordered[i].arrival_s
        while i < len(ordered) and ordered[i].arrival_s == r:
            suffix += ordered[i].work_s
            i += 1
        bound = max(bound, r + suffix / (pods * speed))
    return bound
