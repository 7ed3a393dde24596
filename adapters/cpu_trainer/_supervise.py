"""Running one training child to its end: start it confined, stream its steps, kill all of it, read its output.

:func:`train_in_child` lays out the child's directory (:mod:`._confine`), writes its request, starts it in
its own process group (``adapters.prime_rl.procgroup``), forwards each step it reports as a callback,
and stops it at its deadline (plus a grace for the step in flight and saving the weights). When it ends,
on its own or not, the whole group is killed, and every process of its private uid too (which catches a
process that left the group with ``setsid``; under bubblewrap or ``unshare`` the pid namespace dies with
it anyway). Only then are ``report.json`` and ``model.safetensors`` read, as data: a typed decode and a
safetensors file, never code. A child without a usable report is classified from what it reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog

from adapters.prime_rl.classify import last_error_line, strip_ansi
from adapters.prime_rl.procgroup import GroupProcess, tail_text
from adapters.prime_rl.progress import LineFollower
from adapters.sandbox import ChildFailure, IsolationPlan, processes_of, release_uid
from handlers.ports.inner_trainer import FailureReason

from ._child import ChildReport, ChildRequest, StepLine
from ._confine import ChildLimits, Launch, prepare_launch
from ._loop import StepRecord, TrainReport
from ._settings import CpuTrainSettings
from ._warm import TrainZygote, WarmChild

__all__ = ["ChildOutcome", "TrainingFailed", "train_in_child"]

log = structlog.get_logger(__name__)

_POLL_S = 0.2


class TrainingFailed(Exception):
    def __init__(self, reason: FailureReason, detail: str, *, isolation: str, log_tail: str = "") -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.isolation = isolation
        self.log_tail = log_tail


class ChildOutcome(msgspec.Struct, frozen=True, kw_only=True):
    report: TrainReport
    weights: Path
    isolation: str
    note: str
    uid: int | None  # the unprivileged uid the child ran as (None: the engine's own)
    rlimits: dict[str, int]
    setup_seconds: float  # the child's start-up: interpreter, imports, checkpoint, env import
    path: str = "cold"  # "warm": a fork of the training zygote; "cold": a bubblewrap and interpreter of its own
    path_note: str = ""  # why a cold child ran ("" when warm)
    cpu_seconds: float = 0.0  # the child's own CPU time, as it reported it (informational: the child is untrusted)
    wall_seconds: float


async def train_in_child(
    *,
    plan: IsolationPlan,
    root: Path,
    env_src: Path,
    checkpoint: Path,
    env_id: str,
    env_config: dict[str, Any],
    family: str,
    settings: CpuTrainSettings,
    deadline_at: float | None,
    kill_grace_s: float,
    limits: ChildLimits | None,
    on_step: Callable[[StepRecord], Awaitable[None]],
    zygote: TrainZygote | None = None,
) -> ChildOutcome:
    """Train in a confined child; ``deadline_at`` is a ``time.monotonic()`` bound for starting a new step.

    With ``zygote`` (ready, and ``root`` one of its spool's directories) the child is a confined fork of it
    (:mod:`._warm`), else a bubblewrap sandbox and interpreter of its own; the layout, the request, the uid
    and rlimits, the supervision and the end (everything killed before the output is read) are the same.
    Raises :class:`._warm.ZygoteUnavailable` if the zygote refuses the fork (nothing of the child ran).
    """
    try:
        launch = prepare_launch(plan, root, env_src, checkpoint, threads=settings.threads, limits=limits)
    except ChildFailure as exc:  # the env package is too large to copy
        raise TrainingFailed("config_error", f"[env].path: {exc}", isolation=plan.mode) from None
    if launch.note:
        log.warning("cpu_trainer.weaker_isolation", isolation=launch.isolation, note=launch.note)
    now = time.monotonic()
    request = ChildRequest(
        checkpoint=launch.inside_checkpoint,
        env_id=env_id,
        env_dir=launch.inside_env,
        env_config=env_config,
        family=family,
        settings=settings,
        deadline_s=None if deadline_at is None else max(0.0, deadline_at - now),
        out_dir=launch.inside_out,
        rlimits=launch.rlimits,
        uid=launch.uid,
    )
    (root / "request.json").write_bytes(msgspec.json.encode(request))
    (root / "request.json").chmod(0o644)
    out = root / "out"
    hard_deadline = None if deadline_at is None else deadline_at + kill_grace_s
    follower = LineFollower(out / "progress.jsonl")
    seen = _Seen(settings.max_steps)
    started = time.monotonic()
    proc: GroupProcess | WarmChild
    if zygote is not None:
        proc = await WarmChild.start(zygote, root, root / "child.log", (limits or ChildLimits()).tmpfs_bytes)
    else:
        proc = await GroupProcess.start(launch.argv, cwd=launch.cwd, env=launch.env, log_path=root / "child.log")
    path = "cold" if zygote is None else "warm"
    log.info("cpu_trainer.child_started", pid=proc.pid, isolation=launch.isolation, uid=launch.uid, path=path)
    timed_out = False
    try:
        while True:
            code = await proc.wait(_POLL_S)
            await seen.forward(follower, on_step)
            if code is not None:
                break
            if hard_deadline is not None and time.monotonic() >= hard_deadline:
                timed_out = True
                await proc.stop(grace_s=0.0)
                break
    finally:
        # Whatever happened (an exit, the deadline, a cancel): nothing of the child survives into scoring.
        await asyncio.shield(_end_everything(proc, launch))
    await seen.forward(follower, on_step)
    wall = time.monotonic() - started
    outcome = _outcome(launch, root, proc.returncode, seen.env_started, timed_out, kill_grace_s, wall)
    return msgspec.structs.replace(outcome, path=path)


class _Seen:
    """Forwards the child's step lines: typed, in order, at most one per step (its output is untrusted)."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self.last_step = 0
        self.env_started = False

    async def forward(self, follower: LineFollower, on_step: Callable[[StepRecord], Awaitable[None]]) -> None:
        if follower.path.is_symlink():  # the child made it point elsewhere: this process reads nothing there
            return
        for text in follower.read_new():
            try:
                line = msgspec.json.decode(text, type=StepLine)
            except msgspec.DecodeError:
                continue
            if line.event == "env_import":
                self.env_started = True
            if line.event != "step":
                continue
            try:
                record = msgspec.json.decode(line.record, type=StepRecord)
            except msgspec.DecodeError:
                continue
            if self.last_step < record.step <= self.max_steps:
                self.last_step = record.step
                await on_step(record)


async def _end_everything(proc: GroupProcess | WarmChild, launch: Launch) -> None:
    # No grace: the child's report (if any) is written, and a process still running now is one the env
    # left behind, which a grace period would only give time to tamper.
    if proc.returncode is None:
        await proc.stop(grace_s=0.0)
    else:
        await proc.reap_stragglers(grace_s=0.0)
    if launch.uid is not None:
        # A process of the child's private uid outside its group (it called setsid): killed all the same.
        for _ in range(50):
            pids = processes_of(launch.uid)
            if not pids:
                break
            log.warning("cpu_trainer.uid_stragglers", uid=launch.uid, pids=pids)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.05)
        release_uid(launch.uid)  # after the sweep: another child (of any engine) may have it now


def _outcome(
    launch: Launch,
    root: Path,
    code: int | None,
    env_started: bool,
    timed_out: bool,
    grace_s: float,
    wall: float,
) -> ChildOutcome:
    iso = launch.isolation
    tail = strip_ansi(tail_text(root / "child.log", 4000))
    report = _read_report(root / "out" / "report.json")
    if timed_out and (report is None or not report.ok):
        raise TrainingFailed(
            "timeout", f"training ran {grace_s:g} s past its deadline and was killed", isolation=iso, log_tail=tail
        )
    if report is None:
        how = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
        last = last_error_line(tail) or (tail.strip().splitlines() or ["no output"])[-1]
        reason: FailureReason = "env_crash" if env_started else "trainer_crash"
        where = " while running the env's code" if env_started else ""
        raise TrainingFailed(
            reason, f"the training process died{where} ({how}) without a report: {last}", isolation=iso, log_tail=tail
        )
    if not report.ok:
        raise TrainingFailed(report.failure or "trainer_crash", report.detail, isolation=iso, log_tail=tail)
    try:
        train_report = msgspec.json.decode(report.report, type=TrainReport)
    except msgspec.DecodeError as exc:
        raise TrainingFailed("trainer_crash", f"unusable train report: {exc}", isolation=iso, log_tail=tail) from None
    weights = root / "out" / "model.safetensors"
    if not weights.is_file() or weights.is_symlink():
        raise TrainingFailed("trainer_crash", "training ended without its weights file", isolation=iso, log_tail=tail)
    return ChildOutcome(
        report=train_report,
        weights=weights,
        isolation=iso,
        note=launch.note,
        uid=launch.uid,
        rlimits=launch.rlimits,
        setup_seconds=report.setup_seconds,
        wall_seconds=wall,
        cpu_seconds=max(0.0, report.cpu_seconds),
    )


def _read_report(path: Path) -> ChildReport | None:
    if not path.is_file() or path.is_symlink() or path.stat().st_size > 16 << 20:
        return None
    try:
        return msgspec.json.decode(path.read_bytes(), type=ChildReport)
    except (msgspec.DecodeError, OSError):
        return None
