"""The pod-agent port: what the dispatcher needs from the service that runs jobs on a pod.

The HTTP pod agent (``adapters/pod/server.py``) and its client (``adapters/pod/client.py``) implement it over
the wire; an in-process agent (``adapters/pod/inproc.py``) implements it directly for simulations and tests.
The wire documents are defined here, once, so that server, client and fakes cannot drift apart
(docs/gpu-runner-spec.md describes them).

Submission is idempotent by job id: submitting a job id the agent already has returns that job (whatever its
state) and never starts a second run, so a controller that crashed mid-dispatch simply submits again.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from handlers.ports.inner_trainer import JobResult

__all__ = [
    "EVAL_NEEDED",
    "AgentAuthError",
    "AgentBusy",
    "AgentError",
    "AgentEvalRefused",
    "AgentEvent",
    "AgentEventsPage",
    "AgentHealth",
    "AgentJobConflict",
    "AgentJobStatus",
    "AgentJobUnknown",
    "AgentNotFinished",
    "AgentNotReady",
    "AgentResult",
    "AgentUnreachable",
    "JobSubmission",
    "PodAgent",
    "SelfCheck",
    "SelfCheckItem",
]

JOB_STATES = ("queued", "running", "succeeded", "failed")
#: The event a job's stream carries when its training has ended and its scoring waits for the hidden eval
#: package, which the controller then sends (``send_eval``): a pod never builds the hidden set itself.
EVAL_NEEDED = "eval_needed"


class JobSubmission(msgspec.Struct, frozen=True, kw_only=True):
    """What accompanies a bundle: sent as query parameters of ``POST /jobs/{job_id}``."""

    job_id: str
    family: str
    attempt: int = 1
    time_budget_s: float = 0.0  # 0: no limit on the pod side
    bundle_sha256: str = ""  # checked by the agent against the bytes it received


class AgentEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a job's progress stream. ``seq`` counts from 1; a cursor is the last seq seen."""

    seq: int
    ts: float  # the pod's wall clock (informational: the controller's log stamps its own time)
    kind: str  # "state" | "progress" | "log" | "eval_needed"
    state: str = ""  # for kind == "state": the job's new state
    phase: str = ""
    step: int = 0
    total_steps: int = 0
    reward: float | None = None
    loss: float | None = None
    message: str = ""


class AgentJobStatus(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    state: str  # queued | running | succeeded | failed
    attempt: int = 1
    family: str = ""
    bundle_sha256: str = ""
    events: int = 0  # the stream's length (the last seq)
    created: bool = False  # True only in the answer to the submission that created it


class AgentEventsPage(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    events: list[AgentEvent]
    next_cursor: int  # pass it back to continue after these events
    done: bool  # the job has finished and ``events`` reaches the end of its stream


class AgentResult(msgspec.Struct, frozen=True, kw_only=True):
    """The result document of a finished job: the trainer's result plus what the agent measured."""

    job_id: str
    attempt: int
    state: str  # succeeded | failed
    result: JobResult
    bundle_sha256: str = ""
    trainer: str = ""
    timings: dict[str, float] = {}  # queued_at / started_at / finished_at (pod clock) and wall_s, phases
    log: str = ""  # the job's log on the agent (capped)


class SelfCheckItem(msgspec.Struct, frozen=True, kw_only=True):
    """One check of the pod's self-check: what was checked, whether it held, and what was found."""

    name: str  # "gpu" | "prime_rl" | "vllm" | "scoring" | "ait" | "bootstrap" | ...
    ok: bool
    detail: str = ""  # what was found (a version, a GPU name) or why it failed, one line


class SelfCheck(msgspec.Struct, frozen=True, kw_only=True):
    """The pod agent's check of its own machine (GPU, trainer stack at the pinned revisions) before any job.

    ``pending`` while it runs, then ``passed`` or ``failed``; the agent refuses jobs unless ``passed``. A
    trainer that needs no GPU stack (the CPU trainer, the stand-in) passes at once with no items.
    """

    state: str = "passed"  # pending | passed | failed
    items: list[SelfCheckItem] = []
    duration_s: float = 0.0

    def failed(self) -> list[SelfCheckItem]:
        return [i for i in self.items if not i.ok]

    def summary(self) -> str:
        """One line: the failed items with their details, else every item's finding."""
        shown = self.failed() or self.items
        return "; ".join(f"{i.name}: {i.detail}" if i.detail else i.name for i in shown)


class AgentHealth(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    trainer: str
    version: str = ""
    busy: str = ""  # the job id it runs, "" when free
    jobs: int = 0
    uptime_s: float = 0.0
    self_check: SelfCheck = SelfCheck()  # an agent that predates the self-check reports none: passed


class AgentError(Exception):
    """Base of every error the pod-agent port raises."""


class AgentUnreachable(AgentError):
    """No answer (connection refused or reset, timeout, proxy error, 5xx): the pod may be dead."""


class AgentAuthError(AgentError):
    """The agent refused the bearer token (401): a configuration error, never retried."""


class AgentJobUnknown(AgentError):
    """The agent does not know this job id (404)."""


class AgentJobConflict(AgentError):
    """The job id exists with a different bundle (409): refusing beats running the wrong bytes."""


class AgentNotFinished(AgentError):
    """The result of a job that is still queued or running was asked for (409 ``not_finished``)."""


class AgentBusy(AgentError):
    """The agent is running another job (409): one job per pod at a time."""


class AgentNotReady(AgentError):
    """The agent's self-check is pending or failed (409 ``not_ready``): it takes no job until it passes."""


class AgentEvalRefused(AgentError):
    """The job is not waiting for an eval package (409 ``eval_refused``): it is accepted only after training."""


class PodAgent(Protocol):
    """The calls the dispatcher makes on a pod's agent, addressed by the pod's URL and bearer token."""

    async def health(self, url: str, token: str) -> AgentHealth: ...

    async def submit(self, url: str, token: str, job: JobSubmission, bundle: bytes) -> AgentJobStatus: ...

    async def status(self, url: str, token: str, job_id: str) -> AgentJobStatus: ...

    async def events(self, url: str, token: str, job_id: str, cursor: int, wait_s: float) -> AgentEventsPage: ...

    async def result(self, url: str, token: str, job_id: str) -> AgentResult: ...

    async def cancel(self, url: str, token: str, job_id: str) -> AgentJobStatus: ...

    async def send_eval(self, url: str, token: str, job_id: str, package: bytes) -> AgentJobStatus:
        """Deliver the hidden eval package (a tar) to a job that asked for it (``eval_needed``)."""
        ...
