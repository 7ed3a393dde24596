"""What a simulated fleet run reports: the trace, per-job outcomes, per-GPU usage and the headline
numbers. Every struct carries ``simulated=True``: nothing in it ran on a GPU or cost money.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["GpuUsage", "JobOutcome", "SimEvent", "SimResult"]


class SimEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the simulated trace."""

    simulated: bool = True
    t: float
    kind: str  # pod.created | pod.stock_out | pod.ready | pod.terminated | pod.lost | job.started |
    #            job.succeeded | job.requeued | job.failed | budget.refused
    pod: str = ""
    job: str = ""
    gpu: str = ""
    usd: float = 0.0  # pod.created / budget.refused: the committed spend the gate compared to the budget
    detail: str = ""


class JobOutcome(msgspec.Struct, frozen=True, kw_only=True):
    simulated: bool = True
    status: Literal["succeeded", "failed", "unfinished"]
    attempts: int
    finished_s: float | None = None
    gpu: str = ""


class GpuUsage(msgspec.Struct, kw_only=True):
    simulated: bool = True
    pods: int = 0
    pod_hours: float = 0.0
    busy_hours: float = 0.0
    cost_usd: float = 0.0
    stockouts: int = 0


class SimResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one simulated run. ``simulated`` is always true: nothing here ran on a GPU."""

    simulated: bool = True
    seed: int
    policy: str  # the dispatcher's [fleet] order
    max_pods: int
    jobs: int
    succeeded: int
    failed: int
    unfinished: int
    makespan_s: float
    lower_bound_s: float
    makespan_ratio: float
    total_work_s: float
    longest_job_s: float
    billed_pod_s: float
    busy_pod_s: float
    lost_work_s: float
    idle_fraction: float
    cost_usd: float
    cost_per_job_usd: float
    pods_launched: int
    bootstrap_failures: int
    pod_deaths: int
    job_retries: int
    stockouts: int
    budget_refusals: int
    by_gpu: dict[str, GpuUsage]
    outcomes: dict[str, JobOutcome]
    trace: list[SimEvent]
    wall_clock_h: float = 0.0  # virtual hours until the dispatcher finished (pool reaped)
