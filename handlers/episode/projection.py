"""The episodes projection: each episode's status, attempts, workspace files and token usage.

The workspace files map (path -> blob hash) is what lets a workspace be rebuilt byte for byte from the
log at any point: ``materialise`` writes those blobs back out.
"""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import (
    AgentTurnTaken,
    EpisodeFinished,
    EpisodeStarted,
    JobQueued,
    RewardComputed,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
    ToolCalled,
    ToolReturned,
    WorkspaceFileWritten,
)

__all__ = ["EpisodeState", "EpisodesProjection"]


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


class EpisodesProjection(Projection[dict[str, EpisodeState]]):
    name = "episodes"
    state_type = dict[str, EpisodeState]

    def initial(self) -> dict[str, EpisodeState]:
        return {}

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
        return s

    @handles(JobQueued)
    def _queued(self, s: dict[str, EpisodeState], e: JobQueued) -> dict[str, EpisodeState]:
        ep = s.get(e.episode_id)
        if ep is not None:
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
