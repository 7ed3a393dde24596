"""The job queue projection: each job's place in queued -> assigned -> running -> succeeded | failed | requeued.

A pure fold of ``job.*`` events. ``requeued`` is a waiting state like ``queued`` (the job waits for its next
attempt); ``succeeded`` and ``failed`` are final and nothing moves a job out of them. An attempt's outcome
carries the key of its ``job.assigned``; an outcome with another attempt's key is stale (it lost a race with
a requeue) and changes nothing, so a job can never finish twice or finish on an attempt it no longer runs.
Anything out of order is counted in ``anomalies`` instead of raising: a projection must replay any log.

``job.cancel_requested`` on a job not yet final puts it in ``cancels`` until its outcome: the dispatcher fails
a waiting one at once and stops an active one on its pod first (handlers/fleet/job_effects.py).
"""

from __future__ import annotations

import statistics
from typing import Final

import msgspec

from engine.projection import Projection, handles
from events import (
    JobAssigned,
    JobCancelRequested,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
)

__all__ = [
    "ACTIVE",
    "CANCELLED",
    "FINAL",
    "WAITING",
    "JobEntry",
    "QueueProjection",
    "QueueState",
    "active_jobs",
    "duration_estimate",
    "waiting_jobs",
]

WAITING: Final = frozenset({"queued", "requeued"})  # may be assigned
ACTIVE: Final = frozenset({"assigned", "running"})  # an attempt is open on a pod
FINAL: Final = frozenset({"succeeded", "failed"})
CANCELLED: Final = "cancelled"  # the failure reason of a job stopped because its result was no longer wanted


class JobEntry(msgspec.Struct, kw_only=True):
    job_id: str
    episode_id: str
    family: str
    base_model: str
    bundle: str
    time_budget_s: float = 0.0
    estimate_s: float = 0.0  # predicted duration (0: unknown): see duration_estimate
    status: str = "queued"  # queued | assigned | running | succeeded | failed | requeued
    order: int = 0  # seq of job.queued: FIFO position, kept across requeues
    attempts: int = 0  # attempts started so far (the current one included)
    pod_id: str = ""  # the pod of the open attempt
    key: str = ""  # the open attempt's job.assigned key
    cursor: int = 0  # last pod-agent event seen for the open attempt
    step: int = 0
    queued_ts: float = 0.0
    started_ts: float = 0.0
    finished_ts: float = 0.0
    reason: str = ""  # why it failed, or why it was last requeued
    detail: str = ""
    pre: float | None = None
    post: float | None = None
    result_blob: str = ""
    requeues: int = 0


class QueueState(msgspec.Struct, kw_only=True):
    jobs: dict[str, JobEntry] = {}
    counts: dict[str, int] = {}  # status -> number of jobs
    anomalies: int = 0  # events that did not fit the lifecycle (ignored)
    cancels: dict[str, str] = {}  # job id -> why its cancel was requested, until the job's outcome


def waiting_jobs(state: QueueState) -> list[JobEntry]:
    """Jobs that may be assigned now, oldest first (sorted: never the dict's order)."""
    return sorted([j for j in state.jobs.values() if j.status in WAITING], key=lambda j: (j.order, j.job_id))


def active_jobs(state: QueueState) -> list[JobEntry]:
    """Jobs with an open attempt, by job id."""
    return sorted([j for j in state.jobs.values() if j.status in ACTIVE], key=lambda j: j.job_id)


def duration_estimate(state: QueueState, family: str, base_model: str) -> float:
    """What a new job of ``family`` on ``base_model`` will take, from this run's own history: the median wall
    time (start to success) of its succeeded jobs of the same family and base model; 0.0 (unknown) when none.

    Recorded in ``job.queued`` so the longest-first order (handlers/fleet/policy.py) has something to sort by:
    without it every job of a run carried the same time budget and the order fell back to FIFO, and a step of
    the CPU replica ended with one long job running alone on one of its two pods (docs/performance.md,
    "The replica's idle cores").
    """
    walls = [
        j.finished_ts - j.started_ts
        for j in state.jobs.values()
        if j.status == "succeeded" and j.family == family and j.base_model == base_model and j.started_ts > 0
    ]
    return round(statistics.median(walls), 3) if walls else 0.0


class QueueProjection(Projection[QueueState]):
    name = "queue"
    state_type = QueueState

    def initial(self) -> QueueState:
        return QueueState()

    def _set(self, state: QueueState, job: JobEntry, status: str) -> None:
        # the count of each status, kept here (no helper call): a replay moves every job through its states
        counts, old = state.counts, job.status
        left = counts[old] - 1
        if left:
            counts[old] = left
        else:
            del counts[old]
        counts[status] = counts.get(status, 0) + 1
        job.status = status

    def _open_attempt(self, state: QueueState, job_id: str, key: str) -> JobEntry | None:
        """The job if ``key`` names its open attempt (an empty key matches any attempt), else None."""
        job = state.jobs.get(job_id)
        if job is None or job.status in FINAL or (key and key != job.key):
            state.anomalies += 1
            return None
        return job

    @handles(JobQueued)
    def _queued(self, state: QueueState, e: JobQueued) -> QueueState:
        if e.job_id in state.jobs:
            state.anomalies += 1
            return state
        state.jobs[e.job_id] = JobEntry(
            job_id=e.job_id,
            episode_id=e.episode_id,
            family=e.family,
            base_model=e.base_model,
            bundle=e.bundle,
            time_budget_s=e.time_budget_s,
            estimate_s=e.estimate_s,
            order=self.current.seq,
            queued_ts=self.current.ts,
        )
        state.counts["queued"] = state.counts.get("queued", 0) + 1
        return state

    @handles(JobAssigned)
    def _assigned(self, state: QueueState, e: JobAssigned) -> QueueState:
        job = state.jobs.get(e.job_id)
        if job is None or job.status not in WAITING:
            state.anomalies += 1
            return state
        self._set(state, job, "assigned")
        # Attempts only grow, whatever the event says: the attempt count bounds retries. (No max(): CPython 3.11's
        # builtin parses its arguments on every call, and a replay folds one assignment per attempt.)
        attempt = job.attempts + 1
        job.attempts = e.attempt if e.attempt > attempt else attempt
        job.pod_id, job.key = e.pod_id, e.key
        if job.cursor:  # a Struct field write costs several reads: write only what changes
            job.cursor = 0
        return state

    @handles(JobStarted)
    def _started(self, state: QueueState, e: JobStarted) -> QueueState:
        job = state.jobs.get(e.job_id)
        if job is None or job.status != "assigned" or job.pod_id != e.pod_id:
            state.anomalies += 1
            return state
        self._set(state, job, "running")
        job.started_ts = self.current.ts
        return state

    @handles(JobProgressed)
    def _progressed(self, state: QueueState, e: JobProgressed) -> QueueState:
        job = state.jobs.get(e.job_id)
        if job is None or job.status not in ACTIVE:
            state.anomalies += 1
            return state
        # Progress is about half of a run's events: no max() and no write of a field that does not change.
        step = e.step
        if job.step != step and (e.phase != "pre_score" or job.step == 0):
            job.step = step  # a pre-score ending mid-training (CPU trainer) is no step
        if e.cursor > job.cursor:
            job.cursor = e.cursor
        return state

    def _close(self, job: JobEntry) -> None:
        job.pod_id, job.key = "", ""
        if job.cursor:
            job.cursor = 0

    @handles(JobCancelRequested)
    def _cancel_requested(self, state: QueueState, e: JobCancelRequested) -> QueueState:
        job = state.jobs.get(e.job_id)
        if job is None:
            state.anomalies += 1
        elif job.status not in FINAL and e.job_id not in state.cancels:
            state.cancels[e.job_id] = e.reason
        # A job that ended first (it finished while its episode was being dropped) has nothing left to stop.
        return state

    @handles(JobSucceeded)
    def _succeeded(self, state: QueueState, e: JobSucceeded) -> QueueState:
        job = self._open_attempt(state, e.job_id, e.key)
        if job is None:
            return state
        self._set(state, job, "succeeded")
        self._close(job)
        if state.cancels:
            state.cancels.pop(e.job_id, None)
        job.pre, job.post, job.result_blob, job.finished_ts = e.pre, e.post, e.result_blob, self.current.ts
        return state

    @handles(JobFailed)
    def _failed(self, state: QueueState, e: JobFailed) -> QueueState:
        job = self._open_attempt(state, e.job_id, e.key)
        if job is None:
            return state
        self._set(state, job, "failed")
        self._close(job)
        if state.cancels:
            state.cancels.pop(e.job_id, None)
        job.reason, job.detail, job.result_blob, job.finished_ts = e.reason, e.detail, e.result_blob, self.current.ts
        return state

    @handles(JobRequeued)
    def _requeued(self, state: QueueState, e: JobRequeued) -> QueueState:
        job = self._open_attempt(state, e.job_id, e.key)
        if job is None or job.status not in ACTIVE:
            if job is not None:
                state.anomalies += 1
            return state
        self._set(state, job, "requeued")
        self._close(job)
        job.reason, job.requeues = e.reason, job.requeues + 1
        return state
