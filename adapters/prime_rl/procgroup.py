"""Child processes in their own process group: start, wait with a deadline, and kill the whole group.

prime-rl's launcher starts vLLM, env servers, the orchestrator and torchrun workers; vLLM starts its own
engine processes. Killing only the launcher would leave GPU-holding orphans (and, for eval integrity,
code of the agent's env still running when scoring starts). So every child here is started with
``start_new_session=True`` (its pid is its process-group id) and stopped with SIGTERM to the group,
a grace period, then SIGKILL to the group, until no member is left.

A process that calls ``setsid`` leaves its group. So every child also carries a per-process marker in its
environment (``AIT_PROC_MARK=<random>``), which its descendants inherit whatever session or group they move
to; stopping a child also signals every process whose ``/proc/<pid>/environ`` holds that marker. A
descendant that both leaves the group and re-executes itself with a scrubbed environment escapes that too;
so a process whose every child is a job's (the pod agent) calls :func:`adopt_orphans` once: it becomes its
descendants' *subreaper* (``PR_SET_CHILD_SUBREAPER``), so an orphan is re-parented to it instead of to
init and can never leave its process tree, and stopping or reaping a child then also kills every process
in that tree outside the children still running (see docs/eval-integrity.md).

Output goes to a log file, never to a pipe: a child that writes a lot can then never block on a full
pipe, and the file is what the runner tails for progress and failure classification.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec
import structlog

__all__ = [
    "MARK_VAR",
    "GroupProcess",
    "ProcResult",
    "adopt_orphans",
    "group_alive",
    "kill_group",
    "kill_orphans",
    "marked_pids",
    "run_to_end",
    "tail_text",
]

log = structlog.get_logger(__name__)


class ProcResult(msgspec.Struct, frozen=True, kw_only=True):
    returncode: int  # negative: killed by that signal
    timed_out: bool  # we stopped it because its deadline passed
    seconds: float
    log_path: str


_PROC = Path("/proc")
MARK_VAR = "AIT_PROC_MARK"


def _live_members_from_proc(pgid: int) -> list[int] | None:
    """Pids in group ``pgid`` that are not zombies, from /proc (None where /proc is not available).

    Zombies are excluded on purpose: an orphan's zombie is reaped by PID 1, which in a container may
    never happen, and a zombie holds no memory, GPU or files.
    """
    if not (_PROC / "self" / "stat").exists():
        return None
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def marked_pids(mark: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``AIT_PROC_MARK=<mark>`` (this one excluded)."""
    if not mark or not (_PROC / "self" / "stat").exists():
        return []
    needle = f"{MARK_VAR}={mark}".encode()
    me = os.getpid()
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        if stat[stat.rfind(")") + 2 :].split()[:1] != ["Z"]:
            found.append(int(entry.name))
    return found


def group_alive(pgid: int, mark: str = "") -> bool:
    """Whether any non-zombie process of group ``pgid`` (or carrying ``mark``) is left."""
    if marked_pids(mark):
        return True
    members = _live_members_from_proc(pgid)
    if members is not None:
        return bool(members)
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, sig: signal.Signals, mark: str = "") -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in marked_pids(mark):  # descendants that left the group (setsid) but kept the environment
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


async def kill_group(pgid: int, *, grace_s: float, poll_s: float = 0.05, mark: str = "") -> bool:
    """SIGTERM the group, wait up to ``grace_s``, then SIGKILL until it is gone. True if SIGKILL was needed.

    With ``mark``, processes carrying that marker count as members wherever their session or group is.
    """
    if not group_alive(pgid, mark):
        return False
    _signal_group(pgid, signal.SIGTERM, mark)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not group_alive(pgid, mark):
            return False
        await asyncio.sleep(poll_s)
    log.warning("procgroup.sigkill", pgid=pgid, grace_s=grace_s)
    for _ in range(200):  # SIGKILL cannot be ignored; members vanish once their parents reap them
        _signal_group(pgid, signal.SIGKILL, mark)
        if not group_alive(pgid, mark):
            break
        await asyncio.sleep(poll_s)
    return True


_ADOPTING = False
_LEADERS: set[int] = set()  # pids of the GroupProcess leaders still running (their trees are not orphans)
_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (Linux); False where the kernel refuses.

    Only for a process whose every child belongs to the job it runs (the pod agent): from then on
    :func:`kill_orphans` kills whatever descendant is not one of the running children's trees.
    """
    global _ADOPTING
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        ok = False
    _ADOPTING = _ADOPTING or ok
    return ok


def _parents() -> dict[int, tuple[int, bool]]:
    """pid -> (parent pid, is a zombie), from /proc."""
    out: dict[int, tuple[int, bool]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 2:
            out[int(entry.name)] = (int(fields[1]), fields[0] == "Z")
    return out


def kill_orphans() -> list[int]:
    """With :func:`adopt_orphans` on: SIGKILL every descendant outside the running leaders' trees, reap them.

    Such a process was started by a job's process and outlived it (its parent is gone, so it was re-parented
    here), whatever session, group or environment it gave itself. Returns the pids killed.
    """
    if not _ADOPTING or not (_PROC / "self" / "stat").exists():
        return []
    me = os.getpid()
    killed: list[int] = []
    for _ in range(50):
        parents = _parents()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _zombie) in parents.items():
            children.setdefault(ppid, []).append(pid)
        stack = [p for p in children.get(me, []) if p not in _LEADERS]
        tree: list[int] = []
        while stack:
            pid = stack.pop()
            tree.append(pid)
            stack.extend(children.get(pid, []))
        live = [p for p in tree if not parents[p][1]]
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in children.get(me, []):  # adopted orphans are this process's children: reap them
            if pid not in _LEADERS:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not live:
            break
        killed += live
        time.sleep(0.02)
    if killed:
        log.warning("procgroup.orphans_killed", pids=sorted(set(killed)))
    return sorted(set(killed))


def tail_text(path: Path | str, max_bytes: int = 16_000) -> str:
    """The last ``max_bytes`` of a text file ('' if it does not exist), decoded leniently."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except FileNotFoundError:
        return ""
    return data.decode("utf-8", errors="replace")


class GroupProcess:
    """One child process leading its own process group, with its output in ``log_path``."""

    def __init__(self, proc: asyncio.subprocess.Process, log_path: Path, started: float, mark: str = "") -> None:
        self._proc = proc
        self.log_path = log_path
        self.started = started
        self.mark = mark  # the AIT_PROC_MARK value every descendant inherits

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def pgid(self) -> int:
        return self._proc.pid  # start_new_session: the child is its group's leader

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        log_path: Path | str,
        user: int | None = None,
    ) -> GroupProcess:
        """Start ``argv`` in a new session; ``user``: the uid (and gid, no supplementary groups) it runs as."""
        as_user: dict[str, object] = {} if user is None else {"user": user, "group": user, "extra_groups": []}
        path = Path(log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        mark = secrets.token_hex(12)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:  # the child keeps its own copy of the descriptor
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(cwd),
                env={**env, MARK_VAR: mark},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=fd,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                **as_user,  # type: ignore[arg-type]
            )
        finally:
            os.close(fd)
        log.info("procgroup.started", argv0=argv[0], pid=proc.pid, log=str(path))
        _LEADERS.add(proc.pid)
        return cls(proc, path, time.monotonic(), mark)

    async def wait(self, within_s: float | None = None) -> int | None:
        """The exit code, or None if still running after ``within_s`` seconds.

        A zero wait still gives the event loop a moment: the exit status arrives through a callback.
        """
        if within_s is not None:
            within_s = max(within_s, 0.02)
        try:
            code = await asyncio.wait_for(self._proc.wait(), within_s)
        except TimeoutError:
            return None
        _LEADERS.discard(self._proc.pid)
        return code

    async def stop(self, *, grace_s: float) -> int:
        """Terminate the whole group (see :func:`kill_group`) and reap the leader; returns its exit code."""
        await kill_group(self.pgid, grace_s=grace_s, mark=self.mark)
        code = await self._proc.wait()
        _LEADERS.discard(self._proc.pid)
        kill_orphans()
        return code

    async def reap_stragglers(self, *, grace_s: float) -> bool:
        """After the leader exited on its own: end any member it left behind. True if there were any."""
        orphans = kill_orphans()
        if not group_alive(self.pgid, self.mark):
            return bool(orphans)
        log.warning("procgroup.stragglers", pgid=self.pgid)
        await kill_group(self.pgid, grace_s=grace_s, mark=self.mark)
        kill_orphans()
        return True


async def run_to_end(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    log_path: Path | str,
    timeout_s: float,
    grace_s: float = 5.0,
    user: int | None = None,
) -> ProcResult:
    """Run a command to completion (or to its deadline, then kill its group); no member survives."""
    proc = await GroupProcess.start(argv, cwd=cwd, env=env, log_path=log_path, user=user)
    try:
        code = await proc.wait(timeout_s)
        timed_out = code is None
        if code is None:
            code = await proc.stop(grace_s=grace_s)
        else:
            await proc.reap_stragglers(grace_s=grace_s)
    except BaseException:  # cancelled: still leave nothing running
        await asyncio.shield(proc.stop(grace_s=grace_s))
        raise
    return ProcResult(
        returncode=code,
        timed_out=timed_out,
        seconds=round(time.monotonic() - proc.started, 3),
        log_path=str(proc.log_path),
    )
