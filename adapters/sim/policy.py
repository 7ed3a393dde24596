"""The simulated dispatcher's decisions, as pure functions: which job next, which idle pod, how many
pods to ask for.

Longest-processing-time-first (LPT) on *estimated* durations is what keeps the makespan near its
lower bound: the long jobs start early and the queue drains on short ones, so pods finish within a
short job of each other. FIFO is kept as the baseline to compare against.
"""

from __future__ import annotations

import enum

from .durations import SimJob

__all__ = ["Policy", "job_key", "pod_key", "pods_to_request"]


class Policy(enum.Enum):
    FIFO = "fifo"  # queue order (arrival, then submission order)
    LPT = "lpt"  # longest estimated job first


def job_key(policy: Policy, job: SimJob, index: int) -> tuple[float, float, int]:
    """Sort key for the queue (smallest first); ``index`` breaks ties deterministically."""
    if policy is Policy.LPT:
        return (-job.estimate_s, job.arrival_s, index)
    return (job.arrival_s, 0.0, index)


def pod_key(speed: float, idle_since: float, pod_index: int) -> tuple[float, float, int]:
    """Which idle pod takes the next (i.e. the longest remaining) job: the fastest, then the one idle
    longest (so the most recently used pods are the ones the idle TTL reaps), then the oldest."""
    return (-speed, idle_since, pod_index)


def pods_to_request(*, queued: int, idle: int, booting: int, requesting: int, live: int, max_pods: int) -> int:
    """New provision requests to start now: enough for the waiting jobs that no idle, booting or
    already-requested pod will take, and never past the cap (``live`` counts booting, idle and busy pods)."""
    uncovered = queued - idle - booting - requesting
    room = max_pods - live - requesting
    return max(0, min(uncovered, room))
