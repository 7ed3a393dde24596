"""The episodes projection: each episode's status, attempts, workspace files and token usage.

The workspace files map (path -> blob hash) is what lets a workspace be rebuilt byte for byte from the
log at any point: ``materialise`` writes those blobs back out.
"""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import (
    AgentTurnTaken,
    EpisodeFinalChosen,
    EpisodeFinished,
    EpisodeJobSubmitted,
    EpisodeLimitsSet,
    EpisodeStarted,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobSucceeded,
    RewardComputed,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
    ToolCalled,
    ToolReturned,
    WorkspaceFileWritten,
)

__all__ = ["CurvePoint", "EpisodeJob", "EpisodeState", "EpisodesProjection", "owner_of"]


class CurvePoint(msgspec.Struct, frozen=True):
    """One training step of a job as the agent may see it: the *training* reward and loss, never a score."""

    step: int
    reward: float | None
    loss: float | None


class EpisodeJob(msgspec.Struct, kw_only=True):
    """One job of a multi-job episode. ``pre`` / ``post`` are hidden-eval scores: the reward reads them, the
    agent's tools never do (they read ``curve`` and the dev scores)."""

    job_id: str
    index: int
    parent_job_id: str = ""
    bundle: str = ""
    attempt: int = 0
    base_model: str = ""
    queued: bool = False  # its job.queued is in the log (a resumed episode queues the ones without)
    reserve_usd: float = 0.0
    reserve_s: float = 0.0
    submitted_ts: float = 0.0
    status: str = "queued"  # queued | running | succeeded | failed
    phase: str = ""
    step: int = 0
    total_steps: int = 0
    curve: list[CurvePoint] = []
    dev_pre: float | None = None
    dev_post: float | None = None
    pre: float | None = None
    post: float | None = None
    train_seconds: float = 0.0
    seconds: float = 0.0  # the job's whole wall time (its timings' total), what the budget settles
    failure: str = ""
    detail: str = ""
    ended_ts: float = 0.0


class EpisodeState(msgspec.Struct, kw_only=True):
    episode_id: str
    task_id: str
    family: str
    policy: str
    spec: str = ""
    sampler_version: int = 0
    group_id: str = ""
    status: str = "running"  # running | validated | rejected | no_submission | budget_refused | error
    reason: str = ""
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    attempts: int = 0
    parseable: bool = False
    validated_attempt: int = 0
    files: dict[str, str] = {}  # path -> blob ("" = deleted)
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    probe_seconds: list[float] = []
    job_id: str = ""
    job_model: str = ""
    job_time_budget_s: float = 0.0
    reward: float | None = None
    started_ts: float = 0.0
    finished_ts: float = 0.0
    max_jobs: int = 1  # > 1: a multi-job episode (the fields below)
    job_budget_usd: float = 0.0
    wall_s: float = 0.0
    jobs: dict[str, EpisodeJob] = {}  # job id -> its state, in submission order
    final_job: str = ""
    rejected: int = 0  # rejected submissions


def owner_of(state: dict[str, EpisodeState], job_id: str) -> EpisodeState | None:
    """The multi-job episode that submitted ``job_id`` (None for a one-shot episode's job or an unknown one)."""
    for ep in state.values():
        if job_id in ep.jobs:
            return ep
    return None


class EpisodesProjection(Projection[dict[str, EpisodeState]]):
    name = "episodes"
    state_type = dict[str, EpisodeState]

    def __init__(self) -> None:
        # Which multi-job episode holds a job: derived from the state (every ep.jobs), kept here, not in the
        # state, so the state (its hash, its snapshots) stays what it was. A job outcome or progress event must
        # find its episode without visiting every episode: a long run has thousands of episodes and half its
        # events are progress (that visit made each one cost ~60 us at 1,000 episodes, ~250 us at 4,000).
        # Built from the state the first time a state object is seen (a snapshot's, a fresh one) and kept up to
        # date by _job_submitted, the one handler that adds a job to an episode.
        self._owners: dict[str, str] = {}  # job id -> episode id
        self._owners_of: dict[str, EpisodeState] | None = None

    def initial(self) -> dict[str, EpisodeState]:
        return {}

    def owner(self, s: dict[str, EpisodeState], job_id: str) -> EpisodeState | None:
        """:func:`owner_of` in constant time (the multi-job episode that submitted ``job_id``, or None)."""
        if self._owners_of is not s:
            self._owners = {job: episode_id for episode_id, ep in s.items() for job in ep.jobs}
            self._owners_of = s
        episode_id = self._owners.get(job_id)
        if episode_id is None:
            return None
        ep = s.get(episode_id)
        return ep if ep is not None and job_id in ep.jobs else None

    @handles(EpisodeStarted)
    def _started(self, s: dict[str, EpisodeState], e: EpisodeStarted) -> dict[str, EpisodeState]:
        s[e.episode_id] = EpisodeState(
            episode_id=e.episode_id,
            task_id=e.task_id,
            family=e.family,
            policy=e.policy,
            spec=e.spec,
            sampler_version=e.sampler_version,
            group_id=e.group_id,
            started_ts=self.current.ts,
        )
        return s

    @handles(EpisodeLimitsSet)
    def _limits(self, s: dict[str, EpisodeState], e: EpisodeLimitsSet) -> dict[str, EpisodeState]:
        ep = s[e.episode_id]
        ep.max_jobs, ep.job_budget_usd, ep.wall_s = e.max_jobs, e.job_budget_usd, e.wall_s
        return s

    @handles(AgentTurnTaken)
    def _turn(self, s: dict[str, EpisodeState], e: AgentTurnTaken) -> dict[str, EpisodeState]:
        ep = s[e.episode_id]
        ep.turns += 1
        ep.input_tokens += e.input_tokens
        ep.cached_input_tokens += e.cached_input_tokens
        ep.output_tokens += e.output_tokens
        return s

    @handles(ToolCalled)
    def _called(self, s: dict[str, EpisodeState], e: ToolCalled) -> dict[str, EpisodeState]:
        s[e.episode_id].tool_calls += 1
        return s

    @handles(ToolReturned)
    def _returned(self, s: dict[str, EpisodeState], e: ToolReturned) -> dict[str, EpisodeState]:
        if not e.ok:
            s[e.episode_id].tool_errors += 1
        return s

    @handles(WorkspaceFileWritten)
    def _written(self, s: dict[str, EpisodeState], e: WorkspaceFileWritten) -> dict[str, EpisodeState]:
        s[e.episode_id].files[e.path] = e.blob
        return s

    @handles(SubmissionReceived)
    def _received(self, s: dict[str, EpisodeState], e: SubmissionReceived) -> dict[str, EpisodeState]:
        ep = s[e.episode_id]
        ep.attempts = max(ep.attempts, e.attempt)
        ep.parseable = ep.parseable or e.parseable
        return s

    @handles(SubmissionValidated)
    def _validated(self, s: dict[str, EpisodeState], e: SubmissionValidated) -> dict[str, EpisodeState]:
        ep = s[e.episode_id]
        ep.validated_attempt = e.attempt
        ep.probe_seconds.append(e.probe_seconds)
        return s

    @handles(SubmissionRejected)
    def _rejected(self, s: dict[str, EpisodeState], e: SubmissionRejected) -> dict[str, EpisodeState]:
        s[e.episode_id].probe_seconds.append(e.probe_seconds)
        s[e.episode_id].rejected += 1
        return s

    @handles(EpisodeJobSubmitted)
    def _job_submitted(self, s: dict[str, EpisodeState], e: EpisodeJobSubmitted) -> dict[str, EpisodeState]:
        s[e.episode_id].jobs[e.job_id] = EpisodeJob(
            job_id=e.job_id,
            index=e.index,
            parent_job_id=e.parent_job_id,
            bundle=e.bundle,
            attempt=e.attempt,
            reserve_usd=e.reserve_usd,
            reserve_s=e.reserve_s,
            submitted_ts=self.current.ts,
        )
        if self._owners_of is s:
            self._owners[e.job_id] = e.episode_id
        return s

    @handles(JobProgressed)
    def _job_progressed(self, s: dict[str, EpisodeState], e: JobProgressed) -> dict[str, EpisodeState]:
        # A one-shot episode's job (most of a run's progress) is in no multi-job episode: answered here without
        # the call to owner(), for the commonest event of a run
        if self._owners_of is s and e.job_id not in self._owners:
            return s
        ep = self.owner(s, e.job_id)
        if ep is None:
            return s
        job = ep.jobs[e.job_id]
        job.status, job.phase = "running", e.phase or job.phase
        if e.phase == "train":  # pre_score / post_score progress carries hidden scores: never kept for the agent
            job.step, job.total_steps = e.step, e.total_steps or job.total_steps
            if not job.curve or job.curve[-1].step != e.step:
                job.curve.append(CurvePoint(e.step, e.reward, e.loss))
        return s

    @handles(JobSucceeded)
    def _job_succeeded(self, s: dict[str, EpisodeState], e: JobSucceeded) -> dict[str, EpisodeState]:
        ep = self.owner(s, e.job_id)
        if ep is not None:
            job = ep.jobs[e.job_id]
            job.status, job.pre, job.post, job.train_seconds = "succeeded", e.pre, e.post, e.train_seconds
            job.dev_pre, job.dev_post = e.metrics.get("dev_pre"), e.metrics.get("dev_post")
            # The job's wall time as the dispatcher recorded it (``wall_s``; a trainer's own ``total`` otherwise).
            job.seconds = e.timings.get("wall_s", e.timings.get("total", e.train_seconds))
            job.ended_ts = self.current.ts
        return s

    @handles(JobFailed)
    def _job_failed(self, s: dict[str, EpisodeState], e: JobFailed) -> dict[str, EpisodeState]:
        ep = self.owner(s, e.job_id)
        if ep is not None:
            job = ep.jobs[e.job_id]
            job.status, job.failure, job.detail = "failed", e.reason, e.detail[:500]
            job.seconds, job.ended_ts = job.reserve_s, self.current.ts  # no timings: count its whole reservation
        return s

    @handles(EpisodeFinalChosen)
    def _final(self, s: dict[str, EpisodeState], e: EpisodeFinalChosen) -> dict[str, EpisodeState]:
        s[e.episode_id].final_job = e.job_id
        return s

    @handles(JobQueued)
    def _queued(self, s: dict[str, EpisodeState], e: JobQueued) -> dict[str, EpisodeState]:
        ep = s.get(e.episode_id)
        if ep is not None and e.job_id in ep.jobs:
            ep.jobs[e.job_id].queued, ep.jobs[e.job_id].base_model = True, e.base_model
        elif ep is not None and ep.max_jobs <= 1:  # a multi-job episode's jobs are in ep.jobs
            ep.job_id, ep.job_model, ep.job_time_budget_s = e.job_id, e.base_model, e.time_budget_s
        return s

    @handles(RewardComputed)
    def _reward(self, s: dict[str, EpisodeState], e: RewardComputed) -> dict[str, EpisodeState]:
        if e.episode_id in s:
            s[e.episode_id].reward = e.reward
        return s

    @handles(EpisodeFinished)
    def _finished(self, s: dict[str, EpisodeState], e: EpisodeFinished) -> dict[str, EpisodeState]:
        ep = s[e.episode_id]
        ep.status, ep.reason, ep.finished_ts = e.status, e.reason, self.current.ts
        return s
