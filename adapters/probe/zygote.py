"""The warm probe's zygote: runs INSIDE bubblewrap, imports verifiers once, forks one confined child per submission.

Run as a script (``python -I -B zygote.py``) by :mod:`adapters.probe._warm` inside the same bubblewrap sandbox
as the cold probe (no network, read-only system/Python/venv, no project tree, no ``$HOME``, no key), with one
extra read-only bind: the engine's spool directory at ``/sandbox/spool``, where each submission's workspace copy
appears as ``/sandbox/spool/<sid>/ws``. Like ``sandbox_driver.py`` it imports nothing from this project, and it
never runs agent code itself: only its forked children do, after they are confined.

Control channel: a ``SOCK_SEQPACKET`` socket on fd 0. The zygote answers ``ready`` once verifiers is imported
and a self-test fork has built the namespaces a child needs; then, per request:

- ``spawn`` (with four fds: the child's request pipe, reply pipe, stderr pipe and status pipe): fork ``C1``,
  which keeps only those four fds, unshares new mount, pid, network, ipc, uts and cgroup namespaces, makes every
  mount private, mounts a fresh ``/tmp``, a fresh ``/sandbox/home``, a fresh devpts, binds its own workspace
  copy read-only at ``/sandbox/ws`` and covers ``/sandbox/spool`` with an empty tmpfs (no other submission's
  copy is visible), brings up a loopback of its own, and forks ``C2``, pid 1 of the new pid namespace, which
  mounts a ``/proc`` of that namespace and forks ``C3``: the driver (``sandbox_driver.main``), which applies the
  rlimits and switches to the submission's fresh uid (no capabilities, ``PR_SET_NO_NEW_PRIVS``) before any
  agent code runs, exactly as in the cold path. When ``C3`` exits, ``C2`` kills every process left in the
  namespace, writes ``C3``'s wait status and CPU time on the status pipe and exits (the kernel then kills what is
  left); ``C1`` and ``C2`` die with their parent (``PR_SET_PDEATHSIG``).
- ``kill``: SIGKILL to that submission's ``C1`` (so ``C2``, so the whole pid namespace).

Children share nothing writable: each has its own mounts, pid/network/ipc namespaces and uid; what they inherit
from the zygote is a copy-on-write image of an interpreter that has only imported verifiers.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import importlib
import importlib.util
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from types import ModuleType
from typing import Any

_NEWNS, _NEWCGROUP, _NEWUTS, _NEWIPC = 0x20000, 0x02000000, 0x04000000, 0x08000000
_NEWPID, _NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG = 1
_CHILD_FDS = 4  # request (0), reply (1), stderr (2), status (3)
_SPOOL = "/sandbox/spool"
# What every probe needs (verifiers, its MCP server, and ``verifiers.v1.tasksets``, which resolving an env id
# imports: 0.35 s), loaded once here instead of once per submission. Library code only, never agent code.
_PRELOAD = ("verifiers.v1", "verifiers.v1.tasksets", "verifiers.v1.utils.loaders", "mcp.server.mcpserver")
_libc = ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args: Any) -> None:
    if getattr(_libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _mount(src: str, dest: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (src, dest, fstype, data)]
    _call("mount", enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3])


def _tmpfs(dest: str, size: int, mode: str) -> None:
    _mount("tmpfs", dest, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode={mode}")


def _loopback_up() -> None:
    """Like bubblewrap's --unshare-net: the namespace's own ``lo`` is up; there is no route out."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        got = fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sH14x", got)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def _trees_under_tmp() -> list[str]:
    """The interpreter's trees (prefixes, the executable's directory) that lie under /tmp, outermost only."""
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    roots.add(os.path.dirname(os.path.realpath(sys.executable)))
    under = sorted(os.path.realpath(r) for r in roots if os.path.realpath(r).startswith("/tmp/"))
    return [p for i, p in enumerate(under) if not any(p.startswith(q + "/") or p == q for q in under[:i])]


def _confine(ws: str, tmpfs_bytes: int) -> None:
    """C1, still root in the zygote's namespaces: new namespaces and mounts of its own (see the docstring)."""
    _call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _call("unshare", _NEWNS | _NEWPID | _NEWNET | _NEWIPC | _NEWUTS | _NEWCGROUP)
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)  # nothing propagates back to the zygote or a sibling
    if ws:
        _mount(ws, "/sandbox/ws", None, _MS_BIND)
        _mount("none", "/sandbox/ws", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    _tmpfs(_SPOOL, 4096, "0000")  # every other submission's copy disappears
    # Python or the venv may live under /tmp (a clone in /tmp, say): the zygote's bwrap binds it there, and the
    # child's fresh /tmp would hide it, and with it every package's metadata (verifiers reads its own). Keep
    # each such tree: held open now, bound back (read-only, with its masks) onto the fresh tmpfs.
    held = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in _trees_under_tmp()]
    _tmpfs("/tmp", tmpfs_bytes, "1777")
    for path, fd in held:
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
        _mount("none", path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        os.close(fd)
    _tmpfs("/sandbox/home", tmpfs_bytes, "0777")
    _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    _loopback_up()


def _init(child: int, status_fd: int) -> None:
    """C2, pid 1 of the new namespace: reap orphans; when the driver exits, kill the rest and report."""
    while True:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        if info is None or info.si_pid != child:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid if info else -1, 0)
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # pid 1 of the namespace: every other process in it
        _, status, usage = os.wait4(child, 0)
        report = {"status": status, "cpu_s": usage.ru_utime + usage.ru_stime}
        with contextlib.suppress(OSError):
            os.write(status_fd, (json.dumps(report) + "\n").encode())
        os._exit(0)


def _child(req: dict[str, Any], fds: list[int], driver: ModuleType | None) -> None:
    """C1 (then C2, C3); never returns."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256) for fd in fds]  # no clash with 0-3 while moving
    for n, fd in enumerate(high):
        os.dup2(fd, n, inheritable=True)
    os.closerange(_CHILD_FDS, 65536)  # the zygote's control socket and anything else of it
    _confine(str(req.get("ws", "")), int(req.get("tmpfs_bytes", 64 << 20)))
    c2 = os.fork()
    if c2:
        null = os.open("/dev/null", os.O_RDWR)
        for fd in range(_CHILD_FDS):
            os.dup2(null, fd)
        os.waitpid(c2, 0)
        os._exit(0)
    _call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    c3 = os.fork()
    if c3:
        null = os.open("/dev/null", os.O_RDWR)
        for fd in range(3):
            os.dup2(null, fd)
        _init(c3, 3)
    os.close(3)
    random.seed()  # not the zygote's state, shared by every fork
    if driver is None:
        os._exit(0)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (fd 0 is now this child's pipe)
    os.chdir("/sandbox/home")
    driver.main()
    os._exit(0)


def _fork_child(req: dict[str, Any], fds: list[int], driver: ModuleType | None) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:
        _child(req, fds, driver)
    except BaseException as exc:  # report the setup failure on the reply channel, then die
        with contextlib.suppress(BaseException):
            line = json.dumps({"ok": False, "error": f"warm sandbox setup failed: {exc}"}) + "\n"
            os.write(1, line.encode())
    os._exit(70)


def _self_test() -> str:
    """Build a child's namespaces and mounts once (no workspace, no driver): '' when it works, else why."""
    (req_r, req_w), (rep_r, rep_w), (err_r, err_w), (st_r, st_w) = (os.pipe() for _ in range(_CHILD_FDS))
    pid = _fork_child({"ws": "", "tmpfs_bytes": 1 << 20}, [req_r, rep_w, err_w, st_w], None)
    for fd in (req_r, rep_w, err_w, st_w, req_w):
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    out = os.read(rep_r, 4096).decode(errors="replace")
    done = os.read(st_r, 4096).decode(errors="replace")
    for fd in (rep_r, err_r, st_r):
        os.close(fd)
    if os.waitstatus_to_exitcode(status) == 0 and done:
        return ""
    return (json.loads(out).get("error", "") if out.startswith("{") else "") or f"self-test child: status {status}"


def _load_driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sandbox_driver", "/sandbox/driver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reap(children: dict[str, int]) -> None:
    with contextlib.suppress(ChildProcessError):
        while (pid := os.waitpid(-1, os.WNOHANG)[0]) > 0:
            for sid in [s for s, p in children.items() if p == pid]:
                del children[sid]


def main() -> None:
    ctl = socket.socket(fileno=os.dup(0))
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    started = time.monotonic()
    problem = _self_test()  # first: a host that cannot do it learns so without paying the imports
    driver = _load_driver()
    for name in _PRELOAD if not problem else ():
        importlib.import_module(name)
    from importlib.metadata import version

    gc.freeze()  # the imported objects stay out of every child's collections: fewer copy-on-write pages
    ready = {"ok": not problem, "error": problem, "verifiers": version("verifiers"), "python": sys.version.split()[0]}
    ctl.send(json.dumps({**ready, "seconds": time.monotonic() - started}).encode())
    if problem:
        return
    children: dict[str, int] = {}
    while True:
        _reap(children)
        if not select.select([ctl], [], [], 0.25)[0]:
            continue
        data, fds, _flags, _addr = socket.recv_fds(ctl, 65536, _CHILD_FDS)
        if not data:
            break  # the engine is gone
        req = json.loads(data)
        sid = str(req.get("sid"))
        if req.get("op") == "spawn" and len(fds) == _CHILD_FDS:
            children[sid] = _fork_child(req, fds, driver)
            reply: dict[str, Any] = {"ok": True, "sid": sid}
        elif req.get("op") == "kill":
            with contextlib.suppress(KeyError, ProcessLookupError):
                os.kill(children[sid], signal.SIGKILL)
            reply = {"ok": True, "sid": sid}
        else:
            reply = {"ok": False, "sid": sid, "error": f"bad request {req.get('op')!r} with {len(fds)} fds"}
        for fd in fds:
            os.close(fd)
        ctl.send(json.dumps(reply).encode())


if __name__ == "__main__":
    main()
