"""One sandboxed child per submission: its directory, its command line, and the JSON-lines channel to it.

:class:`Sandbox` copies the workspace (regular files only) into a fresh temporary directory, starts the
trusted driver (``sandbox_driver.py``) under the isolation :mod:`adapters.sandbox` detected, and talks to it one
request at a time with a wall timeout per request. Any timeout, protocol error or death kills the whole
child (process group, and with namespaces the whole pid namespace), after which every request fails fast.

The child's environment is built from scratch (HOME, TMPDIR, PATH, locale, thread caps); nothing of the
engine's environment is passed on, so API keys and tokens never reach agent code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from adapters.sandbox import (
    INSIDE,
    PROJECT_PACKAGES,
    ChildFailure,
    IsolationPlan,
    child_env,
    confined_base,
    copy_regular_files,
    fresh_uid,
    processes_of,
    python_trees,
    release_uid,
    traversable,
    unshare_flags,
)

from ._limits import ProbeLimits

__all__ = ["DRIVER", "Sandbox", "bwrap_command"]

log = structlog.get_logger(__name__)

DRIVER = Path(__file__).with_name("sandbox_driver.py")
_STDERR_KEEP = 16_000


def bwrap_command(plan: IsolationPlan, root: Path, python: Path, env: dict[str, str], limits: ProbeLimits) -> list[str]:
    """The shared base plus the probe's own: the driver and the workspace copy read-only, a tmpfs HOME."""
    b = confined_base(python, env, limits.tmpfs_bytes, plan.bwrap or "bwrap")
    b.bind(root / "ws", INSIDE / "ws")
    b.bind(DRIVER, INSIDE / "driver.py")
    b.tmpfs(INSIDE / "home", limits.tmpfs_bytes, "0777")
    b.args += ["--chdir", str(INSIDE / "home"), "--", str(python), "-I", "-B", str(INSIDE / "driver.py")]
    return b.args


class Sandbox:
    """A started child; use ``async with Sandbox(...) as box`` and ``await box.request(...)``."""

    def __init__(
        self,
        workspace: Path,
        plan: IsolationPlan,
        limits: ProbeLimits,
        python: Path | None = None,
        *,
        preimport: bool = True,
        root: Path | None = None,
    ) -> None:
        self.workspace = workspace
        self.plan = plan
        self.limits = limits
        self.python = python or Path(sys.executable)
        self.preimport = preimport
        # Without bubblewrap the child sees the host's directories as they are: an interpreter under a
        # private directory (e.g. pyenv under /root, mode 0700) cannot run as another uid, so it stays root.
        self.uid_note = ""
        switch = plan.switch_uid
        if switch and plan.mode != "bwrap":
            blocked = [t for t in python_trees(self.python) if not traversable(t)]
            if blocked:
                switch = False
                self.uid_note = f"child stays root (RLIMIT_NPROC not enforced): {blocked[0]} is private to root"
        self.uid: int | None = fresh_uid() if switch else None
        self.nproc = limits.nproc
        self.root = root or Path(tempfile.mkdtemp(prefix="ait-probe-"))  # the warm path's is in its zygote's spool
        self._proc: asyncio.subprocess.Process | None = None
        self._stdin: asyncio.StreamWriter | None = None  # the request channel (the warm path sets its own)
        self._stdout: asyncio.StreamReader | None = None  # the reply channel
        self._stderr: deque[bytes] = deque()
        self._stderr_len = 0
        self._drain: asyncio.Task[None] | None = None
        self._dead: str | None = None
        self.ready: dict[str, Any] = {}
        # CPU seconds the sandboxed driver reported (its own process; agent-controlled, so informational only:
        # benchmarks read it, as bubblewrap does not pass its children's CPU time up to the engine).
        self.cpu_s = 0.0

    @property
    def inside_ws(self) -> str:
        return str(INSIDE / "ws") if self.plan.mode == "bwrap" else str(self.root / "ws")

    def _prepare(self) -> tuple[list[str], dict[str, str], str]:
        ws = self.root / "ws"
        copy_regular_files(self.workspace, ws)
        if self.plan.mode == "bwrap":
            env = child_env(str(INSIDE / "home"), "/tmp", self.python)
            return bwrap_command(self.plan, self.root, self.python, env, self.limits), {"PATH": "/usr/bin:/bin"}, "/"
        home, tmp = self.root / "home", self.root / "tmp"
        home.mkdir()
        tmp.mkdir()
        self.root.chmod(0o755)  # the child's uid must reach ws/ and home/; ws stays owned by root (read-only)
        if self.uid is not None:
            for path in (home, tmp):
                os.chown(path, self.uid, self.uid)
                path.chmod(0o700)
        else:
            # Not root: RLIMIT_NPROC counts every process of this user, so leave room above today's count.
            self.nproc = len(processes_of(os.getuid())) + self.limits.nproc
        cmd = [str(self.python), "-I", "-B", str(DRIVER)]
        if self.plan.mode == "unshare":
            cmd = [shutil.which("unshare") or "unshare", *unshare_flags(), "--", *cmd]
        return cmd, child_env(str(home), str(tmp), self.python), str(home)

    async def start(self) -> None:
        """Launch the child; :meth:`wait_ready` collects its answer (verifiers imported)."""
        cmd, env, cwd = self._prepare()
        self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            limit=64 << 20,
        )
        assert self._proc.stderr is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._drain = asyncio.create_task(self._drain_stderr(self._proc.stderr))
        await self._write(self.init_request())

    def init_request(self) -> dict[str, Any]:
        """The driver's first line: rlimits and the uid to switch to before any agent code runs."""
        rlimits = {**self.limits.rlimits(), "RLIMIT_NPROC": self.nproc}
        init: dict[str, Any] = {"ws": self.inside_ws, "rlimits": rlimits, "uid": self.uid, "gid": self.uid}
        return init | {"preimport": self.preimport, "hide": list(PROJECT_PACKAGES)}

    async def wait_ready(self) -> dict[str, Any]:
        self.ready = await self._read(self.limits.startup_s, "starting Python and importing verifiers")
        return self.ready

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self._stderr.append(chunk)
            self._stderr_len += len(chunk)
            while self._stderr_len > _STDERR_KEEP and len(self._stderr) > 1:
                self._stderr_len -= len(self._stderr.popleft())

    def stderr_tail(self, chars: int = 1500) -> str:
        return b"".join(self._stderr).decode(errors="replace")[-chars:].strip()

    async def _write(self, msg: dict[str, Any]) -> None:
        assert self._stdin is not None
        try:
            self._stdin.write((json.dumps(msg) + "\n").encode())
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the read that follows reports the death

    async def _read(self, limit_s: float, doing: str) -> dict[str, Any]:
        assert self._stdout is not None
        started = time.monotonic()
        try:
            line = await asyncio.wait_for(self._stdout.readline(), limit_s)
        except TimeoutError:
            await self.kill()
            self._dead = f"timed out after {limit_s:g} s while {doing}; the sandbox was killed"
            raise ChildFailure(self._dead) from None
        except ValueError:  # a line over the stream limit
            await self.kill()
            self._dead = f"sent an oversized reply while {doing}"
            raise ChildFailure(self._dead) from None
        if not line:
            code = await self._exit_code()
            self._dead = f"the sandboxed process died while {doing} ({self._describe_exit(code)})"
            raise ChildFailure(self._dead)
        try:
            reply: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            await self.kill()
            self._dead = f"broke the probe protocol while {doing}"
            raise ChildFailure(self._dead) from None
        log.debug("probe.child_reply", doing=doing, seconds=round(time.monotonic() - started, 3))
        if isinstance(reply.get("cpu_s"), float):
            self.cpu_s = reply["cpu_s"]
        return reply

    async def request(self, msg: dict[str, Any], limit_s: float, doing: str) -> dict[str, Any]:
        if self._dead is not None:
            raise ChildFailure(f"not run: {self._dead}")
        await self._write(msg)
        return await self._read(limit_s, doing)

    async def _exit_code(self) -> int | None:
        assert self._proc is not None
        try:
            return await asyncio.wait_for(self._proc.wait(), 5)
        except TimeoutError:
            await self.kill()
            return self._proc.returncode

    def _describe_exit(self, code: int | None) -> str:
        if code is None:
            return "exit status unknown"
        if code >= 0:
            return f"exit code {code}"
        sig = signal.Signals(-code)
        why = {
            signal.SIGXCPU: f"CPU time limit of {self.limits.cpu_s} s exceeded",
            signal.SIGXFSZ: f"file size limit of {self.limits.fsize_bytes >> 20} MiB exceeded",
            signal.SIGKILL: "killed",
            signal.SIGSEGV: "segmentation fault",
        }.get(sig, "")
        return f"signal {sig.name}" + (f": {why}" if why else "")

    async def kill(self) -> None:
        """Kill the child and everything it started; idempotent."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 10)
        if self.uid is not None and self.plan.mode == "none":
            # No pid namespace to take the stragglers down: kill what still runs as the sandbox uid.
            for pid in processes_of(self.uid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.uid is not None:
            release_uid(self.uid)  # the child is over: another child (of any engine) may have its uid

    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def close(self) -> None:
        if self.running() and self._dead is None:
            await self._write({"op": "exit"})
            await self._exit_code()
        await self.kill()
        if self._drain is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._drain, 2)
        await asyncio.to_thread(shutil.rmtree, self.root, True)

    async def __aenter__(self) -> Sandbox:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
