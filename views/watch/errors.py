"""What went wrong lately: rejected submissions (with their failed checks), failed and requeued jobs, lost pods,
failed provisions, refused spend and episodes that ended in an error. Keeps the last few and counts them all."""

from __future__ import annotations

from typing import Final

import msgspec

from engine.projection import Projection, handles
from events import (
    CostRefused,
    EpisodeFinished,
    JobFailed,
    JobRequeued,
    PodLost,
    PodProvisionFailed,
    RunFinished,
    SubmissionRejected,
)

__all__ = ["KEEP", "ErrorEntry", "ErrorsProjection", "ErrorsState"]

KEEP: Final = 50  # entries kept; the dashboard shows the last few


class ErrorEntry(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    ts: float
    kind: str  # the event type
    subject: str  # episode, job or pod id
    message: str


class ErrorsState(msgspec.Struct, kw_only=True):
    recent: list[ErrorEntry] = []
    counts: dict[str, int] = {}  # event type -> how many
    failed_checks: dict[str, int] = {}  # check name -> rejections it caused
    job_failures: dict[str, int] = {}  # classified reason -> failed jobs


class ErrorsProjection(Projection[ErrorsState]):
    name = "errors"
    state_type = ErrorsState

    def initial(self) -> ErrorsState:
        return ErrorsState()

    def _add(self, s: ErrorsState, kind: str, subject: str, message: str) -> ErrorsState:
        s.counts[kind] = s.counts.get(kind, 0) + 1
        s.recent.append(
            ErrorEntry(seq=self.current.seq, ts=self.current.ts, kind=kind, subject=subject, message=message)
        )
        if len(s.recent) > KEEP:
            del s.recent[: len(s.recent) - KEEP]
        return s

    @handles(SubmissionRejected)
    def _rejected(self, s: ErrorsState, e: SubmissionRejected) -> ErrorsState:
        # A check an earlier failure kept from running is not a rejection of its own (one bad job.toml counted as
        # seven).
        failed = [c for c in e.checks if not c.ok and c.ran]
        for c in failed:
            s.failed_checks[c.name] = s.failed_checks.get(c.name, 0) + 1
        what = "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in failed) or "no check failed"
        return self._add(s, e.type, f"{e.episode_id}#{e.attempt}", what)

    @handles(JobFailed)
    def _job_failed(self, s: ErrorsState, e: JobFailed) -> ErrorsState:
        s.job_failures[e.reason] = s.job_failures.get(e.reason, 0) + 1
        return self._add(s, e.type, e.job_id, f"{e.reason}: {e.detail}" if e.detail else e.reason)

    @handles(JobRequeued)
    def _requeued(self, s: ErrorsState, e: JobRequeued) -> ErrorsState:
        where = f" on {e.pod_id}" if e.pod_id else ""
        return self._add(s, e.type, e.job_id, f"attempt {e.attempt}{where} ended: {e.reason}")

    @handles(PodLost)
    def _lost(self, s: ErrorsState, e: PodLost) -> ErrorsState:
        return self._add(s, e.type, e.pod_id, e.reason)

    @handles(PodProvisionFailed)
    def _provision(self, s: ErrorsState, e: PodProvisionFailed) -> ErrorsState:
        gpu = f" ({e.gpu_type})" if e.gpu_type else ""
        return self._add(s, e.type, e.pod_id, f"{e.kind}{gpu}: {e.detail}" if e.detail else f"{e.kind}{gpu}")

    @handles(CostRefused)
    def _refused(self, s: ErrorsState, e: CostRefused) -> ErrorsState:
        return self._add(s, e.type, e.episode_id or e.ref, e.message or f"{e.budget} budget refused {e.kind}")

    @handles(EpisodeFinished)
    def _episode(self, s: ErrorsState, e: EpisodeFinished) -> ErrorsState:
        if e.status in ("error", "budget_refused"):
            return self._add(s, e.type, e.episode_id, f"{e.status}: {e.reason}" if e.reason else e.status)
        return s

    @handles(RunFinished)
    def _run(self, s: ErrorsState, e: RunFinished) -> ErrorsState:
        if e.status != "ok":
            return self._add(s, e.type, "run", f"{e.status}: {e.reason}" if e.reason else e.status)
        return s
