"""One writer per run: an exclusive OS lock on ``<run>/writer.lock``, held while a process has the log open for writing.

Two processes appending to one log with nothing between them corrupt it (each numbers its records from the
seq it read, so the file ends up with duplicate or missing seqs). :class:`EventLog.open
<engine.log.EventLog.open>` therefore takes this lock before it reads the log back, and a second writer
(``ait train``, ``ait resume``, ``ait worker``, ``ait episode`` on the same run) fails at once with
:class:`RunLocked`, whose one-line message names the run and the holder's pid.

``flock`` rather than a pid file: the kernel releases the lock when the holder's file is closed, which
includes the process dying by any means (SIGKILL, OOM), so a crash never leaves a stale lock and nothing has
to guess whether a recorded pid is still alive. The pid written into the file is for the message only.
The descriptor is opened close-on-exec, so subprocesses the engine starts (pods, the probe) do not hold it.

Readers (``tail -f``, ``watch``, ``replay``, ``report``) never take the lock: the log is append-only and they
stop at the last whole line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

__all__ = ["LOCK_NAME", "RunLocked", "WriterLock", "lock_holder"]

LOCK_NAME = "writer.lock"


class RunLocked(Exception):
    """Another process holds the run's writer lock. The message is one line naming the run and the pid."""

    def __init__(self, run_dir: Path, pid: int | None) -> None:
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"run {run_dir.name} ({run_dir}) is open for writing by {who}: one writer per run; "
            f"wait for it to finish or stop it (readers such as `ait tail` / `ait watch` need no lock)"
        )
        self.run_dir = run_dir
        self.pid = pid


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def lock_holder(run_dir: Path | str) -> int | None:
    """The pid recorded by the run's current writer, or None when no process holds the lock (never blocks)."""
    path = Path(run_dir) / LOCK_NAME
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(path) or -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class WriterLock:
    """The held lock of one run directory; :meth:`release` (or the process ending) lets the next writer in."""

    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir = run_dir
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path | str) -> WriterLock:
        """Take the lock now or raise :class:`RunLocked` (never waits)."""
        root = Path(run_dir)
        root.mkdir(parents=True, exist_ok=True)
        path = root / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLocked(root, _holder_pid(path)) from None
        except BaseException:
            os.close(fd)
            raise
        # Ours now: record our pid for the message a refused writer prints.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return cls(root, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock (idempotent). The pid is left in the file: it only means something while the lock is held."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


def _holder_pid(path: Path) -> int | None:
    # The holder writes its pid right after locking: a refused writer that looks in that instant finds the
    # file empty (or the previous holder's pid being replaced), so give it a moment.
    for _ in range(20):
        pid = _read_pid(path)
        if pid is not None:
            return pid
        time.sleep(0.01)
    return None
