"""The run summary projection: status, seed, what the run ran on (``run.wiring``), and how many episodes and jobs
are where."""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import (
    EpisodeFinished,
    EpisodeStarted,
    JobFailed,
    JobQueued,
    JobSucceeded,
    RunFinished,
    RunResumed,
    RunStarted,
    RunWiring,
    SandboxOptedOut,
)

__all__ = ["RunSummary", "RunSummaryProjection"]


class RunSummary(msgspec.Struct):
    run_id: str = ""
    seed: int = 0
    status: str = "new"  # new | running | finished:<status>
    resumes: int = 0
    episodes_started: int = 0
    episodes_finished: dict[str, int] = {}
    jobs_queued: int = 0
    jobs_succeeded: int = 0
    jobs_failed: int = 0
    # the last run.wiring: what the newest process used (inner trainer, learner backend, provider, ...)
    inner_trainer: str = ""
    learner_backend: str = ""
    provider: str = ""
    standin: bool = False
    unsafe_sandbox: str = ""  # "" or what the --unsafe-no-sandbox opt-in allowed ("unshare: <why>")


class RunSummaryProjection(Projection[RunSummary]):
    name = "run"
    state_type = RunSummary

    def initial(self) -> RunSummary:
        return RunSummary()

    @handles(RunStarted)
    def _started(self, s: RunSummary, e: RunStarted) -> RunSummary:
        s.run_id, s.seed, s.status = e.run_id, e.seed, "running"
        return s

    @handles(RunResumed)
    def _resumed(self, s: RunSummary, e: RunResumed) -> RunSummary:
        s.resumes += 1
        s.status = "running"
        return s

    @handles(RunWiring)
    def _wiring(self, s: RunSummary, e: RunWiring) -> RunSummary:
        s.inner_trainer, s.learner_backend, s.provider = e.inner_trainer, e.learner_backend, e.provider
        s.standin = e.standin
        return s

    @handles(RunFinished)
    def _finished(self, s: RunSummary, e: RunFinished) -> RunSummary:
        s.status = f"finished:{e.status}"
        return s

    @handles(SandboxOptedOut)
    def _opted_out(self, s: RunSummary, e: SandboxOptedOut) -> RunSummary:
        s.unsafe_sandbox = f"{e.isolation} (opted out by {e.command})" + (f": {e.note}" if e.note else "")
        return s

    @handles(EpisodeStarted)
    def _ep_started(self, s: RunSummary, e: EpisodeStarted) -> RunSummary:
        s.episodes_started += 1
        return s

    @handles(EpisodeFinished)
    def _ep_finished(self, s: RunSummary, e: EpisodeFinished) -> RunSummary:
        s.episodes_finished[e.status] = s.episodes_finished.get(e.status, 0) + 1
        return s

    @handles(JobQueued)
    def _queued(self, s: RunSummary, e: JobQueued) -> RunSummary:
        s.jobs_queued += 1
        return s

    @handles(JobSucceeded)
    def _succeeded(self, s: RunSummary, e: JobSucceeded) -> RunSummary:
        s.jobs_succeeded += 1
        return s

    @handles(JobFailed)
    def _failed(self, s: RunSummary, e: JobFailed) -> RunSummary:
        s.jobs_failed += 1
        return s
