"""A multi-job episode's job budget: may one more job start, within the episode's money and wall time?

Each job reserves its worst case when it is submitted: ``time_budget_s`` of wall time (the trainer stops it
there) and that many seconds at the fleet's price. The reservation holds until the job's outcome settles it at
what it really took. The rules, checked against the episodes projection and decided with no ``await`` before
the ``episode.job_submitted`` that records the reservation (so two submissions can never both pass a limit):

- jobs: at most ``max_jobs`` submitted jobs per episode;
- money: settled + reserved USD of the episode's jobs, plus the new job's worst case, <= ``job_budget_usd``;
- wall time: the new job's worst-case end (now + ``time_budget_s``) <= the episode's start + ``wall_s``, so every
  job the episode starts is over by its wall-time limit, however many run at once.

A settlement above its reservation (a job that ran past its time budget) is counted in full and reported as
*overrun*: money spent is never hidden. While committed spend passes the cap no job is admitted; the
invariant (a stateful property test checks it) is ``committed - overrun <= budget``.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.episode.projection import EpisodeJob, EpisodeState

__all__ = ["JobAdmission", "admit_job", "committed_usd", "overrun_usd", "settled_usd"]

_EPS = 1e-9  # float slack: reservations are sums of products of the same few numbers


@dataclass(frozen=True)
class JobAdmission:
    ok: bool
    reason: str = ""  # why not (for the agent)
    reserve_usd: float = 0.0
    reserve_s: float = 0.0


def settled_usd(job: EpisodeJob, usd_per_s: float) -> float:
    """What an ended job cost; an open job's reservation."""
    if job.status in ("succeeded", "failed"):
        return job.seconds * usd_per_s
    return job.reserve_usd


def committed_usd(ep: EpisodeState, usd_per_s: float) -> float:
    return sum(settled_usd(j, usd_per_s) for j in ep.jobs.values())


def overrun_usd(ep: EpisodeState, usd_per_s: float) -> float:
    return sum(max(0.0, settled_usd(j, usd_per_s) - j.reserve_usd) for j in ep.jobs.values())


def admit_job(ep: EpisodeState, *, now: float, time_budget_s: float, usd_per_s: float) -> JobAdmission:
    """Whether the episode may submit one more job of ``time_budget_s`` at ``usd_per_s``, and its reservation."""
    if len(ep.jobs) >= ep.max_jobs:
        return JobAdmission(False, f"this episode has used all {ep.max_jobs} of its jobs")
    reserve_usd = time_budget_s * usd_per_s
    committed = committed_usd(ep, usd_per_s)
    if committed + reserve_usd > ep.job_budget_usd + _EPS:
        return JobAdmission(
            False,
            f"the episode's job budget is ${ep.job_budget_usd:.4f}: ${committed:.4f} is spent or reserved and this "
            f"job may cost ${reserve_usd:.4f} (its whole time budget)",
        )
    deadline = ep.started_ts + ep.wall_s
    if now + time_budget_s > deadline + _EPS:
        return JobAdmission(
            False,
            f"a new job may run {time_budget_s:.0f}s but only {max(0.0, deadline - now):.0f}s of the episode's "
            f"{ep.wall_s:.0f}s wall-time budget are left",
        )
    return JobAdmission(True, reserve_usd=reserve_usd, reserve_s=time_budget_s)
