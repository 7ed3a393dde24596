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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import structlog

from adapters.sandbox import IsolationPlan

from ._confine import ChildLimits, zygote_argv

__all__ = ["TrainZygote", "WarmChild", "ZygoteUnavailable", "close_zygotes", "zygote_for"]

log = structlog.get_logger(__name__)

_STARTUP_S = 180.0  # importing torch + transformers + verifiers on a busy 2-core machine
_FAILURES_BEFORE_GIVING_UP = 2


class ZygoteUnavailable(Exception):
    """The warm path cannot run this job; ``str`` says why (the trainer falls back to the cold path)."""


class TrainZygote:
    """The long-lived sandboxed process that forks confined training children (loop-independent)."""

    def __init__(self, plan: IsolationPlan, python: Path, spool: Path | None, threads: int) -> None:
        self.plan = plan
        self.python = python
        self.own_spool = spool is None
        self.spool = Path(tempfile.mkdtemp(prefix="ait-train-zygote-")) if spool is None else spool
        self.spool.mkdir(parents=True, exist_ok=True)
        self.threads = threads
        self.info: dict[str, Any] = {}
        self._lock = threading.Lock()  # the process and its state
        self._io = threading.Lock()  # one request and its reply at a time on the control socket
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._ready = threading.Event()
        self._problem = ""  # set for good once the warm path proved impossible here
        self._failures = 0
        self._errlog: IO[bytes] | None = None

    def argv(self) -> list[str]:
        return zygote_argv(self.plan, self.spool, threads=self.threads, limits=ChildLimits(), python=self.python)

    def _launch(self) -> None:
        # In the caller's (the event loop's) thread: bubblewrap's --die-with-parent follows the starting thread.
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if self._errlog is not None:
            self._errlog.close()
        self._errlog = tempfile.TemporaryFile(prefix="ait-train-zygote-err-")  # noqa: SIM115  (kept while it runs)
        try:
            self._proc = subprocess.Popen(
                self.argv(),
                stdin=child.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=self._errlog,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                start_new_session=True,
            )
        finally:
            child.close()
        self._sock = parent
        self._ready = threading.Event()
        threading.Thread(target=self._await_ready, args=(parent, self._ready), daemon=True).start()

    def _await_ready(self, sock: socket.socket, event: threading.Event) -> None:
        try:
            self._handshake(sock)
        finally:
            event.set()

    def _handshake(self, sock: socket.socket) -> None:
        try:
            sock.settimeout(_STARTUP_S)
            info = json.loads(sock.recv(65536) or b"{}")
        except (OSError, ValueError) as exc:
            info = {"ok": False, "error": f"no answer within {_STARTUP_S:g} s ({type(exc).__name__})"}
        with self._lock:
            if info.get("ok"):
                self.info = info
                sock.settimeout(30)
                log.info("cpu_trainer.zygote_ready", seconds=round(float(info.get("seconds", 0)), 2))
                return
            why = str(info.get("error") or f"the zygote exited ({self.stderr_tail()})")
            self._failures += 1
            if "setup failed" in why or self._failures >= _FAILURES_BEFORE_GIVING_UP:
                self._problem = why
            log.warning("cpu_trainer.zygote_failed", reason=why)
            self._stop()

    def stderr_tail(self, chars: int = 600) -> str:
        if self._errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._errlog.seek(0)
            return self._errlog.read().decode(errors="replace")[-chars:].strip()
        return ""

    async def ensure(self) -> None:
        """Start the zygote if needed and wait until it is ready; :class:`ZygoteUnavailable` if it cannot be."""
        with self._lock:
            if self._problem:
                raise ZygoteUnavailable(self._problem)
            if self._proc is None or self._proc.poll() is not None:
                self._stop()
                self._launch()
            event = self._ready  # every job that waits for this start-up waits for the same answer
        await asyncio.to_thread(event.wait, _STARTUP_S + 5)
        with self._lock:
            if self._problem:
                raise ZygoteUnavailable(self._problem)
            if not self.info or self._proc is None or self._proc.poll() is not None:
                raise ZygoteUnavailable("the zygote did not start: " + (self.stderr_tail() or "no reason given"))

    def request(self, msg: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        """One request and its reply (blocking: call it through ``asyncio.to_thread``)."""
        with self._io:
            sock = self._sock
            if sock is None:
                raise ZygoteUnavailable("the zygote is not running")
            try:
                socket.send_fds(sock, [json.dumps(msg).encode()], fds or [])
                data = sock.recv(65536)
            except OSError as exc:
                raise ZygoteUnavailable(f"the zygote stopped answering ({exc})") from None
        if not data:
            raise ZygoteUnavailable("the zygote exited: " + (self.stderr_tail() or "no reason given"))
        reply: dict[str, Any] = json.loads(data)
        return reply

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        self.info = {}

    def close(self) -> None:
        with self._lock:
            self._stop()
            if self._errlog is not None:
                self._errlog.close()
                self._errlog = None
        if self.own_spool:
            shutil.rmtree(self.spool, ignore_errors=True)


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
