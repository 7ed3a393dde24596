"""The engine side of a zygote: start it, wait for its ready line, send it requests, stop it.

A zygote is a long-lived process under bubblewrap that imported a heavy stack once and forks a confined child
per request (the validation probe's ``zygote.py``, the CPU trainer's ``_zygote.py``). Both clients share this
base: the process and its control socket (``SOCK_SEQPACKET``, one JSON message per packet, file descriptors
passed with ``SCM_RIGHTS``), the start-up handshake on a thread of its own, the give-up rule, the stderr tail
that explains a failure, and the process-group kill. Each subclass says what differs: the command line, its
start-up time, its spool's ownership, its log events and the exception the callers catch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, ClassVar

from .isolation import IsolationPlan

__all__ = ["ZygoteClient", "ZygoteUnavailable", "tree_cpu_seconds"]

_FAILURES_BEFORE_GIVING_UP = 2


class ZygoteUnavailable(Exception):
    """The warm path cannot run this request; ``str`` says why (the caller falls back to its cold path)."""


class ZygoteClient:
    """The long-lived sandboxed process that forks confined children; thread-safe, loop-independent."""

    unavailable: ClassVar[type[ZygoteUnavailable]] = ZygoteUnavailable  # what its callers catch
    events: ClassVar[str] = "zygote"  # the log events: ``<events>.zygote_ready``, ``<events>.zygote_failed``
    errlog_prefix: ClassVar[str] = "ait-zygote-err-"
    log: ClassVar[Any]  # the subclass module's structlog logger (its name is the logger name)

    def __init__(self, plan: IsolationPlan, python: Path, spool: Path, *, own_spool: bool) -> None:
        self.plan = plan
        self.python = python
        self.spool = spool
        self.own_spool = own_spool  # removed on close only if the zygote made it
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
        """The zygote's command line (bubblewrap first)."""
        raise NotImplementedError

    def _launch(self, startup_s: float) -> None:
        """Start the process (in the caller's thread: bubblewrap dies with the thread that started it).

        In the event loop's thread, then: bubblewrap's ``--die-with-parent`` follows the starting thread.
        """
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if self._errlog is not None:
            self._errlog.close()
        self._errlog = tempfile.TemporaryFile(prefix=self.errlog_prefix)  # noqa: SIM115  (kept while it runs)
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
        threading.Thread(target=self._await_ready, args=(parent, self._ready, startup_s), daemon=True).start()

    def _await_ready(self, sock: socket.socket, event: threading.Event, startup_s: float) -> None:
        try:
            self._handshake(sock, startup_s)
        finally:
            event.set()

    def _handshake(self, sock: socket.socket, startup_s: float) -> None:
        try:
            sock.settimeout(startup_s)
            info = json.loads(sock.recv(65536) or b"{}")
        except (OSError, ValueError) as exc:
            info = {"ok": False, "error": f"no answer within {startup_s:g} s ({type(exc).__name__})"}
        with self._lock:
            if info.get("ok"):
                self.info = info
                sock.settimeout(30)
                self.log.info(f"{self.events}.zygote_ready", seconds=round(float(info.get("seconds", 0)), 2))
                return
            why = str(info.get("error") or f"the zygote exited ({self.stderr_tail()})")
            self._failures += 1
            if "setup failed" in why or self._failures >= _FAILURES_BEFORE_GIVING_UP:
                self._problem = why
            self.log.warning(f"{self.events}.zygote_failed", reason=why)
            self._stop()

    def stderr_tail(self, chars: int = 600) -> str:
        if self._errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._errlog.seek(0)
            return self._errlog.read().decode(errors="replace")[-chars:].strip()
        return ""

    async def _ensure(self, startup_s: float) -> None:
        """Start the zygote if needed and wait until it is ready; :attr:`unavailable` if it cannot be."""
        with self._lock:
            if self._problem:
                raise self.unavailable(self._problem)
            if self._proc is None or self._proc.poll() is not None:
                self._stop()
                self._launch(startup_s)
            event = self._ready  # every caller that waits for this start-up waits for the same answer
        await asyncio.to_thread(event.wait, startup_s + 5)
        with self._lock:
            if self._problem:
                raise self.unavailable(self._problem)
            if not self.info or self._proc is None or self._proc.poll() is not None:
                raise self.unavailable("the zygote did not start: " + (self.stderr_tail() or "no reason given"))

    def request(self, msg: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        """One request and its reply (blocking: call it through ``asyncio.to_thread``)."""
        with self._io:
            sock = self._sock
            if sock is None:
                raise self.unavailable("the zygote is not running")
            try:
                socket.send_fds(sock, [json.dumps(msg).encode()], fds or [])
                data = sock.recv(65536)
            except OSError as exc:
                raise self.unavailable(f"the zygote stopped answering ({exc})") from None
        if not data:
            raise self.unavailable("the zygote exited: " + (self.stderr_tail() or "no reason given"))
        reply: dict[str, Any] = json.loads(data)
        return reply

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


def tree_cpu_seconds(root: int) -> float:
    """utime+stime of ``root`` and its live descendants, plus what their reaped children used, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{entry.name}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    kids.setdefault(int(fields[1]), []).append(int(entry.name))
                    ticks[int(entry.name)] = sum(int(x) for x in fields[11:15])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += kids.get(pid, [])
    return total / tick
