"""Progress lines on the console while a run works: what it is doing now, from the events it records.

A reactor (``runtime.start_reactor(ProgressLines(console))``) that turns the events of an episode and its
job into short lines, each stamped with the seconds since the command started: the submission going to the
sandboxed probe and its verdict, the local pod starting, the job's phases as the pod agent streams them
(pre-score, "step k of N" with its mean reward, post-score), a job cut short ("stopped at step 4 of 10:
deadline") and the outcome. It reads events only, so the same lines come out whatever agent, provider or
trainer produced them; :func:`line_for` is the pure part (one event -> one line or none).
"""

from __future__ import annotations

import time

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console
from rich.markup import escape

from events import (
    EpisodeFinished,
    EventBody,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobStoppedEarly,
    JobSucceeded,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodSelfChecked,
    Recorded,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
)

__all__ = ["ProgressLines", "line_for"]


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _job_line(ev: EventBody) -> str | None:
    """The lines of a job's life: queued, started, its phases, stopped early, its outcome."""
    if isinstance(ev, JobQueued):
        return f"job {ev.job_id} queued: {ev.base_model} on {ev.family}, time budget {ev.time_budget_s:g} s"
    if isinstance(ev, JobStarted):
        return f"job {ev.job_id} running on pod {ev.pod_id}"
    if isinstance(ev, JobProgressed):
        if ev.phase == "train":
            of = f" of {ev.total_steps}" if ev.total_steps >= ev.step else ""
            loss = f", loss {ev.loss:.4f}" if ev.loss is not None else ""
            return f"  train step {ev.step}{of}: mean reward {_score(ev.reward)}{loss}"
        what = {"pre_score": "pre-score (base model, hidden eval)", "post_score": "post-score (trained model)"}
        name = what.get(ev.phase, ev.phase or "progress")
        return f"  {name}: {_score(ev.reward)}" if ev.reward is not None else f"  {name}: scoring..."
    if isinstance(ev, JobStoppedEarly):
        return f"[yellow]  job {ev.job_id} {escape(ev.line())}[/yellow]"
    if isinstance(ev, JobSucceeded):
        n = int(ev.metrics.get("eval_n", 0))
        on = f" on {n} hidden tasks" if n else ""
        return f"job {ev.job_id} succeeded: pre {ev.pre:.3f}, post {ev.post:.3f}{on}; trained {ev.train_seconds:.0f} s"
    if isinstance(ev, JobFailed):
        return f"[red]job {ev.job_id} failed: {escape(ev.reason)}: {escape(ev.detail[:300])}[/red]"
    if isinstance(ev, JobRequeued):
        return f"[yellow]job {ev.job_id} requeued (attempt {ev.attempt}): {escape(ev.reason)}[/yellow]"
    return None


def line_for(ev: EventBody) -> str | None:
    """The console line (rich markup) for one event, or None for events that need none."""
    if isinstance(ev, SubmissionReceived):
        if not ev.parseable:
            return f"submission {ev.attempt}: not parseable"
        return f"submission {ev.attempt}: validating in the sandboxed probe..."
    if isinstance(ev, SubmissionValidated):
        return f"submission {ev.attempt}: validated in {ev.probe_seconds:.1f} s ({len(ev.checks)} checks passed)"
    if isinstance(ev, SubmissionRejected):
        failed = [c for c in ev.checks if not c.ok]
        why = "; ".join(f"{c.name}: {c.detail[:160]}" for c in failed[:2]) or "rejected"
        return f"[yellow]submission {ev.attempt}: rejected in {ev.probe_seconds:.1f} s: {escape(why)}[/yellow]"
    if isinstance(ev, EpisodeFinished) and ev.status != "validated":
        return f"episode {ev.episode_id} ended: {ev.status}" + (f" ({escape(ev.reason)})" if ev.reason else "")
    if isinstance(ev, PodRequested):
        return f"starting pod {ev.pod_id} ({ev.provider}, {ev.gpu_type})..."
    if isinstance(ev, PodReady):
        return f"pod {ev.pod_id} ready"
    if isinstance(ev, PodSelfChecked):
        if ev.ok:
            return f"pod {ev.pod_id} self-check passed in {ev.duration_s:.1f} s: {escape(ev.summary()[:300])}"
        return f"[red]pod {ev.pod_id} self-check failed: {escape(ev.summary()[:300])}[/red]"
    if isinstance(ev, PodProvisionFailed):
        return f"[red]pod {ev.pod_id} could not start: {escape(ev.kind)}: {escape(ev.detail[:300])}[/red]"
    return _job_line(ev)


class ProgressLines:
    """The reactor: prints :func:`line_for` of each new event, prefixed with the seconds elapsed."""

    def __init__(self, console: Console, *, started: float | None = None) -> None:
        self.console = console
        self.started = time.monotonic() if started is None else started
        self._seen = -1  # the seq of the last event this reactor has turned into a line (or none)
        self._moved = anyio.Event()

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{time.monotonic() - self.started:6.1f}s[/dim] {text}")

    async def __call__(self, rt: object, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        async for rec in stream:
            text = line_for(rec.event)
            if text is not None:
                self.say(text)
            self._seen = rec.seq
            self._moved.set()

    async def caught_up(self, seq: int, *, timeout_s: float = 5.0) -> None:
        """Return once the events up to ``seq`` have had their lines printed (or after ``timeout_s``).

        A command printing its own summary line awaits this first, so the summary comes after the progress
        lines of what it sums up (the reactor reads the events a moment after they are recorded). The timeout
        only guards a reactor that has stopped: a line out of order is better than a command that never ends."""
        with anyio.move_on_after(timeout_s):
            while self._seen < seq:
                moved = self._moved = anyio.Event()
                await moved.wait()
