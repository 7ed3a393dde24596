"""The warm training path, trainer side: one zygote per process and spool, a confined fork of it per job.

The cold path starts bubblewrap and a fresh interpreter per job and pays for importing torch, transformers and
verifiers every time (most of a small job's CPU time). Here one :class:`TrainZygote` (:mod:`._zygote`, under
the cold child's own bubblewrap confinement: :func:`._confine.zygote_argv`) imports them once, lazily on the
first job; each job's directory is made in the zygote's spool, and the zygote forks a child that enters new
mount, pid, network, ipc, uts and cgroup namespaces, binds only that job's files at the cold child's paths, and
runs the cold child's entry point (rlimits, no-new-privs, the job's fresh uid, then the agent's env).

:func:`zygote_for` raises :class:`ZygoteUnavailable` where the zygote cannot be set up (no bubblewrap, its
self-test fork cannot make the namespaces, it died twice at start-up); the trainer then runs the cold path and
says so in the job's isolation line. A zygote that dies later is started again on the next job.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import structlog

from adapters.sandbox import IsolationPlan, ZygoteClient
from adapters.sandbox import ZygoteUnavailable as BaseUnavailable

from ._confine import ChildLimits, zygote_argv

__all__ = ["TrainZygote", "WarmChild", "ZygoteUnavailable", "close_zygotes", "zygote_for"]

log = structlog.get_logger(__name__)

_STARTUP_S = 180.0  # importing torch + transformers + verifiers on a busy 2-core machine


class ZygoteUnavailable(BaseUnavailable):
    """The warm path cannot run this job; ``str`` says why (the trainer falls back to the cold path)."""


class TrainZygote(ZygoteClient):
    """The long-lived sandboxed process that forks confined training children (loop-independent).

    Start-up, requests and stop are :class:`adapters.sandbox.ZygoteClient`'s; here: its command line, its
    fixed start-up time, the spool (the trainer's work root, or one of its own), and its pid for the children.
    """

    unavailable = ZygoteUnavailable
    events = "cpu_trainer"
    errlog_prefix = "ait-train-zygote-err-"
    log = log

    def __init__(self, plan: IsolationPlan, python: Path, spool: Path | None, threads: int) -> None:
        path = Path(tempfile.mkdtemp(prefix="ait-train-zygote-")) if spool is None else spool
        super().__init__(plan, python, path, own_spool=spool is None)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.threads = threads

    def argv(self) -> list[str]:
        return zygote_argv(self.plan, self.spool, threads=self.threads, limits=ChildLimits(), python=self.python)

    async def ensure(self) -> None:
        """Start the zygote if needed and wait until it is ready; :class:`ZygoteUnavailable` if it cannot be."""
        await self._ensure(_STARTUP_S)

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None


class WarmChild:
    """One job's child, forked by the zygote; the subset of ``GroupProcess`` the supervisor uses."""

    def __init__(self, zygote: TrainZygote, sid: str, status_fd: int) -> None:
        self.zygote = zygote
        self.sid = sid
        self.pid = zygote.pid()  # the zygote's: the child's own pid lives in its namespace
        self.returncode: int | None = None
        self.cpu_s = 0.0  # the child's and its reaped children's CPU time, as its namespace's init reported it
        self._status = status_fd
        self._buf = b""

    @classmethod
    async def start(cls, zygote: TrainZygote, root: Path, log_path: Path, tmpfs_bytes: int) -> WarmChild:
        """Fork the child of the job directory ``root`` (a directory of ``zygote.spool``)."""
        if root.parent.resolve() != zygote.spool.resolve():
            raise ZygoteUnavailable(f"{root} is not in the zygote's spool {zygote.spool}")
        null = os.open(os.devnull, os.O_RDONLY)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        status_r, status_w = os.pipe()
        msg = {"op": "spawn", "sid": root.name, "ws": f"/sandbox/spool/{root.name}", "tmpfs_bytes": tmpfs_bytes}
        try:
            reply = await asyncio.to_thread(zygote.request, msg, [null, log_fd, log_fd, status_w])
        except BaseException:
            os.close(status_r)
            raise
        finally:
            for fd in (null, log_fd, status_w):
                os.close(fd)
        if not reply.get("ok"):
            os.close(status_r)
            raise ZygoteUnavailable(str(reply.get("error")))
        os.set_blocking(status_r, False)
        return cls(zygote, root.name, status_r)

    def _poll(self) -> int | None:
        if self.returncode is not None or self._status < 0:
            return self.returncode
        try:
            while chunk := os.read(self._status, 4096):
                self._buf += chunk
            eof = True
        except BlockingIOError:
            eof = False
        if b"\n" in self._buf:
            report = json.loads(self._buf.split(b"\n", 1)[0])
            self.cpu_s = float(report.get("cpu_s", 0.0))
            self.returncode = os.waitstatus_to_exitcode(int(report["status"]))
        elif eof:  # the namespace's init died without a report: killed
            self.returncode = -signal.SIGKILL
        if self.returncode is not None:
            os.close(self._status)
            self._status = -1
        return self.returncode

    async def wait(self, within_s: float | None = None) -> int | None:
        deadline = None if within_s is None else time.monotonic() + within_s
        while (code := self._poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)
        return code

    async def stop(self, grace_s: float = 0.0) -> None:
        """SIGKILL to the child's namespace through the zygote (its init, then the kernel, end the rest)."""
        if self._poll() is None:
            with contextlib.suppress(ZygoteUnavailable, OSError, ValueError):
                await asyncio.to_thread(self.zygote.request, {"op": "kill", "sid": self.sid})
            if await self.wait(10.0) is None:
                os.close(self._status)
                self._status = -1
                self.returncode = -signal.SIGKILL

    async def reap_stragglers(self, grace_s: float = 0.0) -> None:
        """Nothing to do: the namespace's init killed every process in it before reporting the exit."""


_ZYGOTES: dict[tuple[str, str, str], TrainZygote] = {}
_REGISTRY = threading.Lock()


def zygote_for(plan: IsolationPlan, spool: Path | None, *, threads: int, python: Path | None = None) -> TrainZygote:
    """This process's zygote for that bubblewrap, interpreter and spool (created on first use, closed at exit).

    ``spool`` is the trainer's ``work_root`` (None: a private directory of the zygote's own).
    """
    if plan.mode != "bwrap":
        raise ZygoteUnavailable(f"the warm training path needs bubblewrap ({plan.mode} here)")
    python = python or Path(sys.executable)
    key = (plan.bwrap, str(python), str(spool.resolve()) if spool is not None else "")
    with _REGISTRY:
        if key not in _ZYGOTES:
            _ZYGOTES[key] = TrainZygote(plan, python, spool, threads)
            atexit.register(_ZYGOTES[key].close)
        return _ZYGOTES[key]


def close_zygotes() -> None:
    """Stop every zygote of this process (tests, benchmarks); the next job starts a fresh one."""
    with _REGISTRY:
        for zygote in _ZYGOTES.values():
            zygote.close()
        _ZYGOTES.clear()
