"""The warm probe, engine side: one zygote per engine process, and a confined fork of it per submission.

The cold path (:class:`._sandbox.Sandbox`) starts a bubblewrap sandbox and a fresh interpreter per submission
and pays the ``import verifiers`` (5-9 CPU-s) every time. Here one :class:`Zygote` (``zygote.py`` in the same
bubblewrap sandbox: no network, read-only system/Python/venv, no project, home or key) imports verifiers once;
each :class:`WarmSandbox` copies its workspace into the zygote's spool and asks it to fork a child that enters new
mount, pid, network, ipc, uts and cgroup namespaces with mounts of its own and switches to a fresh uid before
any agent code runs (see ``zygote.py``). The child then speaks the same JSON-lines protocol as the cold driver,
over pipes whose ends the engine passed to the zygote (``SCM_RIGHTS``).

A zygote that cannot be set up here (its self-test fork cannot make the namespaces, e.g. without root) makes
:func:`zygote_for` raise :class:`ZygoteUnavailable`; the validator then runs the cold path and says so in the
report's isolation line. A zygote that dies is started again on the next submission.
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
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import structlog

from adapters.sandbox import INSIDE, IsolationPlan, child_env, confined_base, copy_regular_files, processes_of

from ._limits import ProbeLimits
from ._sandbox import DRIVER, Sandbox

__all__ = ["ZYGOTE", "WarmSandbox", "Zygote", "ZygoteUnavailable", "zygote_for"]

log = structlog.get_logger(__name__)

ZYGOTE = Path(__file__).with_name("zygote.py")
_SPOOL = INSIDE / "spool"
_FAILURES_BEFORE_GIVING_UP = 2


class ZygoteUnavailable(Exception):
    """The warm path cannot run this submission; ``str`` says why (the validator falls back to cold)."""


class Zygote:
    """The long-lived sandboxed process that forks confined children; thread-safe, loop-independent."""

    def __init__(self, plan: IsolationPlan, python: Path) -> None:
        self.plan = plan
        self.python = python
        self.spool = Path(tempfile.mkdtemp(prefix="ait-zygote-"))  # 0700: only root reaches the copies
        self.info: dict[str, Any] = {}
        self._lock = threading.Lock()  # the process and its state
        self._io = threading.Lock()  # one request and its reply at a time on the control socket
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._ready = threading.Event()
        self._problem = ""  # set for good once the warm path proved impossible here
        self._failures = 0
        self._errlog: IO[bytes] | None = None

    def command(self) -> list[str]:
        env = child_env(str(INSIDE / "home"), "/tmp", self.python)
        b = confined_base(self.python, env, 16 << 20, self.plan.bwrap or "bwrap")
        b.bind(self.spool, _SPOOL)
        b.bind(DRIVER, INSIDE / "driver.py")
        b.bind(ZYGOTE, INSIDE / "zygote.py")
        b.tmpfs(INSIDE / "ws", 4096, "0755")  # mount points; every child mounts its own on top
        b.tmpfs(INSIDE / "home", 4096, "0755")
        b.args += ["--chdir", "/", "--", str(self.python), "-I", "-B", str(INSIDE / "zygote.py")]
        return b.args

    def _launch(self, startup_s: float) -> None:
        """Start the process (in the caller's thread: bubblewrap dies with the thread that started it)."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if self._errlog is not None:
            self._errlog.close()
        self._errlog = tempfile.TemporaryFile(prefix="ait-zygote-err-")  # noqa: SIM115  (kept while it runs)
        try:
            self._proc = subprocess.Popen(
                self.command(),
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
            sock.settimeout(startup_s)
            info = json.loads(sock.recv(65536) or b"{}")
        except (OSError, ValueError) as exc:
            info = {"ok": False, "error": f"no answer within {startup_s:g} s ({type(exc).__name__})"}
        with self._lock:
            if info.get("ok"):
                self.info = info
                sock.settimeout(30)
                log.info("probe.zygote_ready", seconds=round(float(info.get("seconds", 0)), 2))
            else:
                why = str(info.get("error") or f"the zygote exited ({self.stderr_tail()})")
                self._failures += 1
                if "setup failed" in why or self._failures >= _FAILURES_BEFORE_GIVING_UP:
                    self._problem = why
                log.warning("probe.zygote_failed", reason=why)
                self._stop()
        event.set()

    def stderr_tail(self, chars: int = 600) -> str:
        if self._errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._errlog.seek(0)
            return self._errlog.read().decode(errors="replace")[-chars:].strip()
        return ""

    async def ensure(self, startup_s: float) -> None:
        """Start the zygote if needed and wait until it is ready; :class:`ZygoteUnavailable` if it cannot be."""
        with self._lock:
            if self._problem:
                raise ZygoteUnavailable(self._problem)
            if self._proc is None or self._proc.poll() is not None:
                self._stop()
                self._launch(startup_s)
            event = self._ready
        await asyncio.to_thread(event.wait, startup_s + 5)
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

    def cpu_seconds(self) -> float:
        """CPU time of everything the zygote's process tree has run so far (for the benchmark)."""
        return _tree_cpu(self._proc.pid) if self._proc is not None else 0.0

    def close(self) -> None:
        with self._lock:
            self._stop()
            if self._errlog is not None:
                self._errlog.close()
        shutil.rmtree(self.spool, ignore_errors=True)


def _tree_cpu(root: int) -> float:
    """utime+stime of ``root`` and its live descendants, plus what their reaped children used."""
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


_ZYGOTES: dict[tuple[str, str], Zygote] = {}
_REGISTRY = threading.Lock()


def zygote_for(plan: IsolationPlan, python: Path) -> Zygote:
    """This process's zygote for that bubblewrap and interpreter (created on first use, closed at exit)."""
    if not plan.confined:
        raise ZygoteUnavailable(f"the warm probe needs bubblewrap ({plan.mode} here)")
    key = (plan.bwrap, str(python))
    with _REGISTRY:
        if key not in _ZYGOTES:
            _ZYGOTES[key] = Zygote(plan, python)
            atexit.register(_ZYGOTES[key].close)
        return _ZYGOTES[key]


class WarmSandbox(Sandbox):
    """A submission's child, forked by the zygote; same protocol and timeouts as :class:`Sandbox`."""

    def __init__(self, workspace: Path, plan: IsolationPlan, limits: ProbeLimits, python: Path, zygote: Zygote) -> None:
        super().__init__(workspace, plan, limits, python, root=Path(tempfile.mkdtemp(dir=zygote.spool)))
        self.zygote = zygote
        self.sid = self.root.name
        self._status: asyncio.StreamReader | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._started = False
        self._exit: int | None = None
        self._gone = False

    async def start(self) -> None:
        copy_to = self.root / "ws"
        await asyncio.to_thread(copy_regular_files, self.workspace, copy_to)
        pipes = [os.pipe() for _ in range(4)]  # request, reply, stderr, status
        ends = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]]
        ws = str(_SPOOL / self.sid / "ws")
        msg = {"op": "spawn", "sid": self.sid, "ws": ws, "tmpfs_bytes": self.limits.tmpfs_bytes}
        try:
            reply = await asyncio.to_thread(self.zygote.request, msg, ends)
        except BaseException:
            for r, w in pipes:
                os.close(r)
                os.close(w)
            raise
        for fd in ends:
            os.close(fd)
        if not reply.get("ok"):
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]):
                os.close(fd)
            raise ZygoteUnavailable(str(reply.get("error")))
        self._started = True
        loop = asyncio.get_running_loop()
        self._stdout = await self._reader(loop, pipes[1][0], 64 << 20)
        stderr = await self._reader(loop, pipes[2][0], 1 << 16)
        self._status = await self._reader(loop, pipes[3][0], 1 << 16)
        pipe = os.fdopen(pipes[0][1], "wb", 0)  # an fd we hold: nothing to block on
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
        self._transports.append(transport)
        self._stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        self._drain = asyncio.create_task(self._drain_stderr(stderr))
        await self._write(self.init_request())

    async def _reader(self, loop: asyncio.AbstractEventLoop, fd: int, limit: int) -> asyncio.StreamReader:
        reader = asyncio.StreamReader(limit=limit)
        pipe = os.fdopen(fd, "rb", 0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        self._transports.append(transport)
        return reader

    def running(self) -> bool:
        return self._started and self._exit is None and not self._gone

    async def _exit_code(self) -> int | None:
        """The driver's exit status, as its namespace's init reported it (None: killed before it could)."""
        if self._exit is not None or self._status is None:
            return self._exit
        try:
            line = await asyncio.wait_for(self._status.readline(), 5)
        except (TimeoutError, ValueError):
            line = b""
        if not line:
            await self.kill()
            return None
        report = json.loads(line)
        self.cpu_s = float(report.get("cpu_s", 0.0))  # the driver and its reaped children, from its init
        self._exit = os.waitstatus_to_exitcode(int(report["status"]))
        return self._exit

    async def kill(self) -> None:
        """SIGKILL to the child's namespace (through the zygote), then every host process of its uid."""
        if self._started and not self._gone:
            self._gone = True
            if self._exit is None:
                with contextlib.suppress(ZygoteUnavailable, OSError, ValueError):
                    await asyncio.to_thread(self.zygote.request, {"op": "kill", "sid": self.sid})
            if self.uid is not None:
                await asyncio.to_thread(_sweep, self.uid)
        for transport in self._transports:
            transport.close()


def _sweep(uid: int, limit_s: float = 10.0) -> None:
    """Kill what runs as the child's uid until nothing does (bounded), as the cold path waits for bubblewrap.

    SIGKILL to a namespace's init returns before its processes are gone: the kernel tears them down one by one
    (64 spinning forks take a second or two on a busy 2-core machine). Until then they still count, so the
    probe is over only when the uid has no process left.
    """
    deadline = time.monotonic() + limit_s
    while (pids := processes_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
