"""Where each running job is: its phase (pre_score, train, post_score), step of total, and last reward and loss.
An entry lives from ``job.started`` to the attempt's outcome."""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import JobFailed, JobProgressed, JobRequeued, JobStarted, JobSucceeded

__all__ = ["JobPhase", "JobPhasesProjection"]


class JobPhase(msgspec.Struct, kw_only=True):
    phase: str = "starting"
    step: int = 0
    total_steps: int = 0
    reward: float | None = None
    loss: float | None = None
    started_ts: float = 0.0


class JobPhasesProjection(Projection[dict[str, JobPhase]]):
    name = "job_phases"
    state_type = dict[str, JobPhase]

    def initial(self) -> dict[str, JobPhase]:
        return {}

    @handles(JobStarted)
    def _started(self, s: dict[str, JobPhase], e: JobStarted) -> dict[str, JobPhase]:
        s[e.job_id] = JobPhase(started_ts=self.current.ts)
        return s

    @handles(JobProgressed)
    def _progressed(self, s: dict[str, JobPhase], e: JobProgressed) -> dict[str, JobPhase]:
        job = s.get(e.job_id)
        if job is not None:
            if e.phase == "pre_score" and job.phase == "train":
                # A trainer may score the base model while it trains (the CPU trainer does): the pre-score's
                # result arriving mid-training neither moves the job back a phase nor replaces the step's reward.
                return s
            job.phase = e.phase or job.phase
            job.step, job.total_steps = e.step, e.total_steps or job.total_steps
            job.reward = e.reward if e.reward is not None else job.reward
            job.loss = e.loss if e.loss is not None else job.loss
        return s

    @handles(JobSucceeded, JobFailed, JobRequeued)
    def _ended(self, s: dict[str, JobPhase], e: JobSucceeded | JobFailed | JobRequeued) -> dict[str, JobPhase]:
        s.pop(e.job_id, None)
        return s
