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
import signal
import tempfile
import threading
import time
from pathlib import Path

import structlog

from adapters.sandbox import (
    INSIDE,
    IsolationPlan,
    ZygoteClient,
    child_env,
    confined_base,
    copy_regular_files,
    processes_of,
    release_uid,
    tree_cpu_seconds,
)
from adapters.sandbox import ZygoteUnavailable as BaseUnavailable

from ._limits import ProbeLimits
from ._sandbox import DRIVER, Sandbox

__all__ = ["ZYGOTE", "WarmSandbox", "Zygote", "ZygoteUnavailable", "zygote_for"]

log = structlog.get_logger(__name__)

ZYGOTE = Path(__file__).with_name("zygote.py")
_SPOOL = INSIDE / "spool"


class ZygoteUnavailable(BaseUnavailable):
    """The warm path cannot run this submission; ``str`` says why (the validator falls back to cold)."""


class Zygote(ZygoteClient):
    """The long-lived sandboxed process that forks confined children; thread-safe, loop-independent.

    Start-up, requests and stop are :class:`adapters.sandbox.ZygoteClient`'s; here: its command line, the
    start-up time the caller gives (the probe's limits), its own spool, and the CPU time of its tree.
    """

    unavailable = ZygoteUnavailable
    events = "probe"
    errlog_prefix = "ait-zygote-err-"
    log = log

    def __init__(self, plan: IsolationPlan, python: Path) -> None:
        # 0700: only root reaches the copies
        super().__init__(plan, python, Path(tempfile.mkdtemp(prefix="ait-zygote-")), own_spool=True)

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

    def argv(self) -> list[str]:
        return self.command()  # the probe's name for it (what a test's capped zygote overrides)

    async def ensure(self, startup_s: float) -> None:
        """Start the zygote if needed and wait until it is ready; :class:`ZygoteUnavailable` if it cannot be."""
        await self._ensure(startup_s)

    def cpu_seconds(self) -> float:
        """CPU time of everything the zygote's process tree has run so far (for the benchmark)."""
        return tree_cpu_seconds(self._proc.pid) if self._proc is not None else 0.0


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
        if self.uid is not None:
            release_uid(self.uid)  # after its sweep: another child (of any engine) may have it now
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
