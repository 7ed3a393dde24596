"""The pod agent's job manager, without HTTP: accept a bundle, run it through an inner trainer, keep its stream.

One job runs at a time (a pod is one GPU). Submission is idempotent by job id: the same id with the same
bundle returns the existing job whatever its state; the same id with different bytes is a conflict. Each
job keeps an append-only event stream (``seq`` from 1) that a reader pages through with a cursor and
long-polls at its end, so a controller that reconnects misses nothing. Every run is appended to
``<workdir>/runs.jsonl`` (the agent's own journal: what started, when).

Scoring data arrive last. A trainer that scores on a hidden eval package (``use_eval_source``, e.g. the
prime-rl runner) is given :meth:`AgentCore.await_eval`: once its training processes have exited it asks,
the stream gets an ``eval_needed`` event, and the controller sends the package it built under the engine's
key (:meth:`AgentCore.provide_eval`, accepted only while the job waits for it). The package is unpacked
into a fresh ``<workdir>/jobs/<id>/eval/`` (mode 0700) that exists only from then on: nothing of the
training phase is left to read it, and the pod never builds a hidden set from a key of its own.

The agent refuses jobs until its self-check has passed (``self_check``: GPU visible, the trainer stack at the
pinned revisions; :mod:`adapters.prime_rl.selfcheck`). The check runs in a worker thread once the agent is
serving (:meth:`AgentCore.start_self_check`), so ``/health`` answers at once and reports it ``pending``, then
``passed`` or ``failed`` with the items that failed; a submission before it passed is :class:`AgentNotReady`.
Without a check (the CPU trainer, the stand-in) the agent is ready at once, and nothing runs.

The HTTP service (:mod:`.server`) and the in-process agent (:mod:`.inproc`) both wrap this class.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import shutil
import time
import traceback
from collections import deque
from collections.abc import Callable
from pathlib import Path

import msgspec

from handlers.episode.bundle import unpack_bundle
from handlers.ports.inner_trainer import InnerTrainer, JobBundle, JobResult, Progress
from handlers.ports.pod_agent import (
    EVAL_NEEDED,
    AgentBusy,
    AgentError,
    AgentEvalRefused,
    AgentEvent,
    AgentEventsPage,
    AgentHealth,
    AgentJobConflict,
    AgentJobStatus,
    AgentJobUnknown,
    AgentNotFinished,
    AgentNotReady,
    AgentResult,
    JobSubmission,
    SelfCheck,
    SelfCheckItem,
)

__all__ = ["AGENT_VERSION", "AgentCore", "BadSubmission", "SelfCheckFn", "valid_job_id"]

#: A blocking check of the pod's machine (run in a worker thread); ``None``: nothing to check.
SelfCheckFn = Callable[[], SelfCheck]

AGENT_VERSION = "1"
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_LOG_LINES = 2000
_MAX_WAIT_S = 60.0  # a long poll never outlasts a proxy's request timeout (Runpod's is 100 s)
EVAL_WAIT_S = 900.0  # how long a job's scoring waits for the controller's eval package


class BadSubmission(AgentError):
    """The submission itself is wrong (job id, bundle bytes, checksum): 400."""


def valid_job_id(job_id: str) -> bool:
    return bool(_JOB_ID.match(job_id))


class _Job:
    def __init__(self, sub: JobSubmission, sha: str, now: float) -> None:
        self.sub = sub
        self.sha = sha
        self.state = "queued"
        self.events: list[AgentEvent] = []
        self.log: deque[str] = deque(maxlen=_LOG_LINES)
        self.result: JobResult | None = None
        self.timings: dict[str, float] = {"queued_at": now}
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None
        self.eval_waiter: asyncio.Future[Path] | None = None  # set while scoring waits for its package
        self.eval_sha = ""  # the package received (idempotent re-sends)

    def status(self, *, created: bool = False) -> AgentJobStatus:
        return AgentJobStatus(
            job_id=self.sub.job_id,
            state=self.state,
            attempt=self.sub.attempt,
            family=self.sub.family,
            bundle_sha256=self.sha,
            events=len(self.events),
            created=created,
        )


class AgentCore:
    def __init__(
        self,
        trainer: InnerTrainer,
        workdir: Path,
        *,
        clock: Callable[[], float] = time.time,
        eval_wait_s: float = EVAL_WAIT_S,
        self_check: SelfCheckFn | None = None,
    ) -> None:
        self.trainer = trainer
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._jobs: dict[str, _Job] = {}
        self._started = time.monotonic()
        self.last_activity = time.monotonic()
        self.eval_wait_s = eval_wait_s
        self._check_fn = self_check
        self.self_check = SelfCheck(state="pending") if self_check is not None else SelfCheck()
        self._check_task: asyncio.Task[None] | None = None
        bind = getattr(trainer, "use_eval_source", None)
        if callable(bind):  # the trainer scores on a hidden eval package: it comes from the controller
            bind(self.await_eval)

    # -- queries -----------------------------------------------------------------------------------

    def _job(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise AgentJobUnknown(f"no job {job_id!r} on this pod")
        return job

    def busy(self) -> str:
        return next((j.sub.job_id for j in self._jobs.values() if j.state in ("queued", "running")), "")

    def health(self) -> AgentHealth:
        return AgentHealth(
            ok=True,
            trainer=self.trainer.name,
            version=AGENT_VERSION,
            busy=self.busy(),
            jobs=len(self._jobs),
            uptime_s=round(time.monotonic() - self._started, 3),
            self_check=self.self_check,
        )

    # -- the self-check ------------------------------------------------------------------------------

    def start_self_check(self) -> None:
        """Run the self-check once, in the background of the running loop (a no-op without one or when started)."""
        if self._check_fn is None or self._check_task is not None:
            return
        self._check_task = asyncio.get_running_loop().create_task(self._self_check(self._check_fn), name="self-check")

    async def _self_check(self, check: SelfCheckFn) -> None:
        t0 = time.monotonic()
        try:
            result = await asyncio.to_thread(check)
        except Exception as exc:  # a bug in a check is a failed check, never a pod that takes jobs
            item = SelfCheckItem(name="self_check", ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])
            result = SelfCheck(state="failed", items=[item])
        state = "passed" if result.items and all(i.ok for i in result.items) else "failed"
        if not result.items:
            state = result.state if result.state in ("passed", "failed") else "failed"
        self.self_check = msgspec.structs.replace(
            result, state=state, duration_s=round(result.duration_s or time.monotonic() - t0, 3)
        )

    def status(self, job_id: str) -> AgentJobStatus:
        return self._job(job_id).status()

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    # -- submission --------------------------------------------------------------------------------

    async def submit(self, sub: JobSubmission, bundle: bytes) -> AgentJobStatus:
        if not valid_job_id(sub.job_id):
            raise BadSubmission(f"job id {sub.job_id!r}: letters, digits, '_', '.', '-' (at most 128)")
        sha = hashlib.sha256(bundle).hexdigest()
        if sub.bundle_sha256 and sub.bundle_sha256 != sha:
            raise BadSubmission(f"bundle sha256 is {sha}, the submission says {sub.bundle_sha256}: bytes damaged")
        if self.self_check.state != "passed":
            if self.self_check.state == "failed":
                raise AgentNotReady(f"the pod's self-check failed: {self.self_check.summary()}; it takes no job")
            raise AgentNotReady("the pod's self-check is still running; it takes no job until the check passes")
        existing = self._jobs.get(sub.job_id)
        if existing is not None:
            if existing.sha != sha:
                raise AgentJobConflict(f"job {sub.job_id!r} exists with another bundle ({existing.sha[:12]})")
            return existing.status()  # idempotent: the same job, never a second run
        running = self.busy()
        if running:
            raise AgentBusy(f"busy with job {running!r}: one job per pod")
        root = self.workdir / "jobs" / sub.job_id / "bundle"
        try:
            await asyncio.to_thread(self._unpack, bundle, root)
        except (ValueError, OSError, EOFError) as exc:
            raise BadSubmission(f"bundle of {sub.job_id!r} cannot be unpacked: {exc}") from None
        job = _Job(msgspec.structs.replace(sub, bundle_sha256=sha), sha, self._clock())
        self._jobs[sub.job_id] = job
        self._emit(job, AgentEvent(seq=0, ts=0.0, kind="state", state="queued"))
        job.task = asyncio.create_task(self._run(job, root), name=f"job-{sub.job_id}")
        return job.status(created=True)

    @staticmethod
    def _unpack(bundle: bytes, root: Path) -> None:
        import shutil
        import tarfile

        if root.exists():  # a half-unpacked bundle from a refused earlier try
            shutil.rmtree(root)
        root.mkdir(parents=True)
        try:
            unpack_bundle(bundle, root)
        except tarfile.TarError as exc:
            raise ValueError(f"not a tar archive: {exc}") from None

    # -- the stream ----------------------------------------------------------------------------------

    def _emit(self, job: _Job, ev: AgentEvent) -> None:
        ev = msgspec.structs.replace(ev, seq=len(job.events) + 1, ts=self._clock())
        job.events.append(ev)
        if ev.kind == "state":
            job.log.append(f"{ev.ts:.3f} state {ev.state}")
        elif ev.message:
            job.log.append(f"{ev.ts:.3f} {ev.kind} {ev.phase} {ev.message}".rstrip())

        async def notify() -> None:
            async with job.changed:
                job.changed.notify_all()

        # Called from synchronous code paths too: wake the pollers on the loop.
        asyncio.get_running_loop().create_task(notify())

    async def events(self, job_id: str, cursor: int, wait_s: float) -> AgentEventsPage:
        job = self._job(job_id)
        if cursor < 0:
            raise BadSubmission(f"cursor must be >= 0, got {cursor}")
        wait_s = max(0.0, min(wait_s, _MAX_WAIT_S))
        if len(job.events) <= cursor and job.state in ("queued", "running") and wait_s > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s), job.changed:
                    await job.changed.wait_for(lambda: len(job.events) > cursor or job.result is not None)
        events = job.events[cursor:]
        done = job.result is not None
        return AgentEventsPage(job_id=job_id, events=events, next_cursor=cursor + len(events), done=done)

    def result(self, job_id: str) -> AgentResult:
        job = self._job(job_id)
        if job.result is None:
            raise AgentNotFinished(f"job {job_id!r} is {job.state}")
        return AgentResult(
            job_id=job_id,
            attempt=job.sub.attempt,
            state=job.state,
            result=job.result,
            bundle_sha256=job.sha,
            trainer=self.trainer.name,
            timings=dict(job.timings),
            log="\n".join(job.log),
        )

    async def cancel(self, job_id: str) -> AgentJobStatus:
        job = self._job(job_id)
        if job.task is not None and not job.task.done():
            job.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await job.task
        return job.status()

    async def close(self) -> None:
        """Cancel every running job (the agent is shutting down)."""
        if self._check_task is not None and not self._check_task.done():
            self._check_task.cancel()
        for job in list(self._jobs.values()):
            if job.task is not None and not job.task.done():
                job.task.cancel()
        tasks = [j.task for j in self._jobs.values() if j.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the hidden eval, delivered after training -------------------------------------------------------

    async def await_eval(self, bundle: JobBundle) -> Path:
        """For the trainer, once training has exited: announce ``eval_needed`` and wait for the package."""
        job = self._job(bundle.job_id)
        if job.eval_waiter is not None and job.eval_waiter.done():
            return job.eval_waiter.result()
        job.eval_waiter = asyncio.get_running_loop().create_future()
        self._emit(
            job,
            AgentEvent(seq=0, ts=0.0, kind=EVAL_NEEDED, phase="score", message=f"{bundle.family} hidden eval package"),
        )
        try:
            async with asyncio.timeout(self.eval_wait_s):
                return await asyncio.shield(job.eval_waiter)
        except TimeoutError:
            waited = f"{self.eval_wait_s:g} s"
            raise TimeoutError(f"no hidden eval package arrived from the controller in {waited}") from None

    async def provide_eval(self, job_id: str, package: bytes, sha256: str = "") -> AgentJobStatus:
        """The controller's package for a job whose scoring waits for it (a re-send of the same bytes is a no-op)."""
        job = self._job(job_id)
        sha = hashlib.sha256(package).hexdigest()
        if sha256 and sha256 != sha:
            raise BadSubmission(f"eval package sha256 is {sha}, the request says {sha256}: bytes damaged")
        if job.eval_sha:
            if job.eval_sha != sha:
                raise AgentJobConflict(f"job {job_id!r} already has another eval package ({job.eval_sha[:12]})")
            return job.status()
        if job.eval_waiter is None or job.eval_waiter.done():
            raise AgentEvalRefused(
                f"job {job_id!r} is {job.state} and not waiting for its eval package: it is accepted only once "
                "the job's training has ended"
            )
        dest = self.workdir / "jobs" / job_id / "eval"
        try:
            root = await asyncio.to_thread(self._unpack_eval, package, dest)
        except (ValueError, OSError, EOFError) as exc:
            raise BadSubmission(f"eval package of {job_id!r} cannot be unpacked: {exc}") from None
        job.eval_sha = sha
        job.eval_waiter.set_result(root)
        self._emit(job, AgentEvent(seq=0, ts=0.0, kind="log", phase="score", message=f"eval package {sha[:12]}"))
        return job.status()

    @staticmethod
    def _unpack_eval(package: bytes, dest: Path) -> Path:
        import tarfile

        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True, mode=0o700)
        dest.chmod(0o700)  # whatever the umask
        try:
            unpack_bundle(package, dest)
        except tarfile.TarError as exc:
            raise ValueError(f"not a tar archive: {exc}") from None
        tops = [p for p in dest.iterdir() if p.is_dir()]
        return tops[0] if len(tops) == 1 else dest

    # -- running -------------------------------------------------------------------------------------

    def _journal(self, job: _Job) -> None:
        entry = {"job_id": job.sub.job_id, "attempt": job.sub.attempt, "bundle_sha256": job.sha}
        line = msgspec.json.encode({**entry, "started_at": self._clock()})
        with (self.workdir / "runs.jsonl").open("ab") as f:
            f.write(line + b"\n")

    async def _run(self, job: _Job, root: Path) -> None:
        sub = job.sub
        job.state = "running"
        job.timings["started_at"] = self._clock()
        self._emit(job, AgentEvent(seq=0, ts=0.0, kind="state", state="running"))
        self._journal(job)

        async def progress(p: Progress) -> None:
            self.touch()
            self._emit(
                job,
                AgentEvent(
                    seq=0,
                    ts=0.0,
                    kind="progress",
                    phase=p.phase,
                    step=p.step,
                    total_steps=p.total_steps,
                    reward=p.reward,
                    loss=p.loss,
                    message=p.message,
                ),
            )

        t0 = time.monotonic()
        try:
            bundle = JobBundle(job_id=sub.job_id, family=sub.family, root=str(root))
            if sub.time_budget_s > 0:
                async with asyncio.timeout(sub.time_budget_s):
                    result = await self.trainer.run(bundle, progress)
            else:
                result = await self.trainer.run(bundle, progress)
        except TimeoutError:
            result = JobResult(
                job_id=sub.job_id, ok=False, failure="timeout", detail=f"over its {sub.time_budget_s:g} s budget"
            )
        except asyncio.CancelledError:  # a cancel request or the agent shutting down: the job ends, recorded
            result = JobResult(job_id=sub.job_id, ok=False, failure="cancelled", detail="cancelled on the pod")
        except Exception as exc:  # the trainer's bug or the env's crash: the job fails, the agent lives on
            tail = "".join(traceback.format_exception(exc))[-4000:]
            detail = f"{type(exc).__name__}: {exc}"
            result = JobResult(job_id=sub.job_id, ok=False, failure="trainer_crash", detail=detail, log_tail=tail)
        if result.job_id != sub.job_id:
            result = msgspec.structs.replace(result, job_id=sub.job_id)
        job.timings["finished_at"] = self._clock()
        job.timings["wall_s"] = round(time.monotonic() - t0, 6)
        for phase, seconds in result.timings.items():
            job.timings[f"phase.{phase}"] = seconds
        if result.log_tail:
            job.log.extend(result.log_tail.splitlines()[-200:])
        job.result = result
        job.state = "succeeded" if result.ok else "failed"
        self._emit(
            job,
            AgentEvent(seq=0, ts=0.0, kind="state", state=job.state, message=result.failure or ""),
        )
        self.touch()
