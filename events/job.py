"""Inner training job events: the queue's lifecycle of one validated job.

Running one attempt of a job on a pod is a side effect: ``job.assigned`` is its request (the runtime fills
``key``; the pod agent is told the job id, so a resubmission after a crash finds the same run), and
``job.succeeded`` / ``job.failed`` / ``job.requeued`` are its outcomes, carrying the attempt's key. A job
that ends without an open attempt (e.g. a bundle that cannot be read) ends with an empty key.

``job.cancel_requested`` says that nobody wants the job's result any more (the outer loop dropped its episode);
the dispatcher ends it as ``job.failed`` with reason ``cancelled``: at once while it waits for a pod, or after
stopping it on its pod.
"""

from __future__ import annotations

from ._base import EventBody, Outcome, Request, event

__all__ = [
    "JobAssigned",
    "JobCancelRequested",
    "JobFailed",
    "JobProgressed",
    "JobQueued",
    "JobRequeued",
    "JobStarted",
    "JobStoppedEarly",
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
    # predicted wall time: the run's median for the family and base model so far (handlers.fleet.queue.
    # duration_estimate); 0: unknown, the time budget stands in. The longest-first order sorts by it.
    estimate_s: float = 0.0


@event("job.assigned")
class JobAssigned(Request, frozen=True, kw_only=True):
    """Attempt ``attempt`` of the job goes to ``pod_id``: the request half of running it there."""

    job_id: str
    pod_id: str
    attempt: int = 1


@event("job.cancel_requested")
class JobCancelRequested(EventBody, frozen=True, kw_only=True):
    """Stop the job: its result is no longer wanted. Not an outcome: the job ends with ``job.failed``
    (reason ``cancelled``) once the dispatcher has stopped it, unless another outcome came first."""

    job_id: str
    reason: str  # why it is no longer wanted, for the log and the report


@event("job.started")
class JobStarted(EventBody, frozen=True, kw_only=True):
    """The pod agent accepted the attempt and is running it."""

    job_id: str
    pod_id: str
    attempt: int = 0


@event("job.progressed")
class JobProgressed(EventBody, frozen=True, kw_only=True):
    job_id: str
    step: int
    reward: float | None = None
    loss: float | None = None
    phase: str = ""  # pre_score | train | post_score
    total_steps: int = 0
    cursor: int = 0  # position in the pod agent's event stream: a reconnecting controller resumes after it
    attempt: int = 0


@event("job.stopped_early")
class JobStoppedEarly(EventBody, frozen=True, kw_only=True):
    """Training ended before the steps the job asked for (recorded just before the attempt's outcome): a
    result scored after 4 of 10 steps must never read as the full job."""

    job_id: str
    steps_done: int
    steps_total: int
    reason: str  # the trainer's stop reason: deadline | no_signal | collapsed | ...
    attempt: int = 0

    def line(self) -> str:
        return f"stopped at step {self.steps_done} of {self.steps_total}: {self.reason}"


@event("job.succeeded")
class JobSucceeded(Outcome, frozen=True, kw_only=True):
    key: str = ""  # the attempt's job.assigned key
    job_id: str
    pre: float
    post: float
    train_seconds: float
    timings: dict[str, float] = {}
    result_blob: str = ""  # blob hash of the pod agent's result document (result, metrics, logs, timings)
    pod_id: str = ""
    attempt: int = 0
    metrics: dict[str, float] = {}


@event("job.failed")
class JobFailed(Outcome, frozen=True, kw_only=True):
    key: str = ""
    job_id: str
    reason: str  # classified: config_error | env_crash | oom | timeout | trainer_crash | pod_lost | ...
    detail: str = ""
    result_blob: str = ""
    pod_id: str = ""
    attempt: int = 0


@event("job.requeued")
class JobRequeued(Outcome, frozen=True, kw_only=True):
    """The attempt ended without a result (its pod died): the job waits for attempt ``attempt + 1``."""

    key: str = ""
    job_id: str
    reason: str
    attempt: int
    pod_id: str = ""
