"""Episode events: the trainer agent's turns, tool calls, workspace edits and submissions."""

from __future__ import annotations

from ._base import EventBody, event

__all__ = [
    "AgentTurnTaken",
    "CheckResult",
    "EpisodeFinalChosen",
    "EpisodeFinished",
    "EpisodeJobSubmitted",
    "EpisodeLimitsSet",
    "EpisodeStarted",
    "SubmissionReceived",
    "SubmissionRejected",
    "SubmissionValidated",
    "ToolCalled",
    "ToolReturned",
    "WorkspaceFileWritten",
]


@event("episode.started")
class EpisodeStarted(EventBody, frozen=True, kw_only=True):
    episode_id: str
    task_id: str
    family: str
    policy: str
    sampler_version: int = 0
    group_id: str = ""
    spec: str = ""  # the task spec's name, e.g. "calc_chain_v1_fast"
    prompt_blob: str = ""  # the opening messages and tool schemas the agent was given
    max_attempts: int = 3


@event("agent.turn_taken")
class AgentTurnTaken(EventBody, frozen=True, kw_only=True):
    """One agent turn. Messages (and token ids / logprobs for trainable policies) live in ``blob``."""

    episode_id: str
    turn: int
    blob: str
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    sampler_version: int = 0


@event("tool.called")
class ToolCalled(EventBody, frozen=True, kw_only=True):
    episode_id: str
    call_id: str
    name: str
    arguments: str  # the raw JSON text the agent sent, parsed or not


@event("tool.returned")
class ToolReturned(EventBody, frozen=True, kw_only=True):
    """A tool's result as the agent saw it. ``content`` is cut at 4000 characters for readers of the log; the
    full text is the blob ``blob`` (empty in logs written before it was recorded), which is what a resumed
    episode puts back into the conversation."""

    episode_id: str
    call_id: str
    ok: bool
    content: str
    error: str = ""
    blob: str = ""


@event("workspace.file_written")
class WorkspaceFileWritten(EventBody, frozen=True, kw_only=True):
    """A workspace file changed; its new content is the blob ``blob`` (empty string: deleted)."""

    episode_id: str
    path: str
    blob: str
    size: int


@event("submission.received")
class SubmissionReceived(EventBody, frozen=True, kw_only=True):
    episode_id: str
    attempt: int
    parseable: bool = True


class CheckResult(EventBody, frozen=True, kw_only=True):
    """One validation check: its name, whether it passed, and what the agent needs to fix it.

    A check that could not run because an earlier one failed (job.toml did not parse, the env did not import) is
    not ok, and its detail starts with :data:`NOT_RUN`: it is not a second mistake of the agent's.
    """

    name: str
    ok: bool
    detail: str = ""
    seconds: float = 0.0

    @property
    def ran(self) -> bool:
        return self.ok or not self.detail.startswith(NOT_RUN)


NOT_RUN = "not run: "


@event("submission.validated")
class SubmissionValidated(EventBody, frozen=True, kw_only=True):
    episode_id: str
    attempt: int
    checks: list[CheckResult]
    probe_seconds: float
    job_blob: str = ""
    isolation: str = ""


@event("submission.rejected")
class SubmissionRejected(EventBody, frozen=True, kw_only=True):
    episode_id: str
    attempt: int
    checks: list[CheckResult]
    probe_seconds: float
    isolation: str = ""


@event("episode.finished")
class EpisodeFinished(EventBody, frozen=True, kw_only=True):
    episode_id: str
    status: str  # "validated" | "rejected" | "no_submission" | "budget_refused" | "error"
    reason: str = ""


@event("episode.limits_set")
class EpisodeLimitsSet(EventBody, frozen=True, kw_only=True):
    """A multi-job episode's limits (the spec's ``episode`` table), recorded right after ``episode.started``: up to
    ``max_jobs`` jobs within ``job_budget_usd`` and ``wall_s`` from the episode's start. A one-shot episode has
    none (its events are exactly what they were before multi-job episodes existed)."""

    episode_id: str
    max_jobs: int
    job_budget_usd: float
    wall_s: float


@event("episode.job_submitted")
class EpisodeJobSubmitted(EventBody, frozen=True, kw_only=True):
    """A multi-job episode's validated submission became job ``job_id`` (its ``index``-th, from 1).

    ``parent_job_id`` is the episode's previous job (the one this revises; "" for the first), so the jobs form a
    chain the report draws as a tree. ``reserve_usd`` / ``reserve_s`` are the job's worst case, reserved against
    the episode's budget (money, wall time) until the job's outcome settles it."""

    episode_id: str
    job_id: str
    index: int
    parent_job_id: str = ""
    bundle: str  # blob hash of the job bundle (as in job.queued)
    attempt: int = 0  # the submission that became this job
    reserve_usd: float = 0.0
    reserve_s: float = 0.0


@event("episode.final_chosen")
class EpisodeFinalChosen(EventBody, frozen=True, kw_only=True):
    """The agent called ``finish(final_job_id)``: ``job_id``'s hidden post-score is the episode's quality."""

    episode_id: str
    job_id: str
