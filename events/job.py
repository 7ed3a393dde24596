"""Inner training job events: the queue's lifecycle of one validated job."""

from __future__ import annotations

from ._base import EventBody, event

__all__ = [
    "JobAssigned",
    "JobFailed",
    "JobProgressed",
    "JobQueued",
    "JobRequeued",
    "JobStarted",
    "JobSucceeded",
]


@event("job.queued")
class JobQueued(EventBody, frozen=True, kw_only=True):
    job_id: str
    episode_id: str
    family: str
    base_model: str
    bundle: str  # blob hash of the job bundle (env package, job.toml, task spec)
    time_budget_s: float = 0.0


@event("job.assigned")
class JobAssigned(EventBody, frozen=True, kw_only=True):
    job_id: str
    pod_id: str
    attempt: int = 1


@event("job.started")
class JobStarted(EventBody, frozen=True, kw_only=True):
    job_id: str
    pod_id: str


@event("job.progressed")
class JobProgressed(EventBody, frozen=True, kw_only=True):
    job_id: str
    step: int
    reward: float | None = None
    loss: float | None = None


@event("job.succeeded")
class JobSucceeded(EventBody, frozen=True, kw_only=True):
    job_id: str
    pre: float
    post: float
    train_seconds: float
    timings: dict[str, float] = {}
    result_blob: str = ""


@event("job.failed")
class JobFailed(EventBody, frozen=True, kw_only=True):
    job_id: str
    reason: str  # classified: config_error | env_crash | oom | timeout | trainer_crash | pod_lost | ...
    detail: str = ""


@event("job.requeued")
class JobRequeued(EventBody, frozen=True, kw_only=True):
    job_id: str
    reason: str
    attempt: int
