"""The unprivileged uids sandboxed children run as: leased host-wide, so no two children ever share one.

A child's uid is what keeps it from the engine's files and from every other child, and what finds its processes
at the end: the sweep after a child kills every process of its uid. Two engines on one host (an ``ait episode``
beside an ``ait train``, the test suite's workers) used to pick from overlapping ranges, checking only that no
process ran under a uid at that instant; two children could then get the same uid, and one engine's sweep killed
the other's child (a probe that fails for no fault of the agent's).

:func:`fresh_uid` now takes a lease on the uid: an exclusive ``flock`` on a file named after it in a directory
shared by every engine of the host (``/run/ait-uids`` when writable, else one in the temporary folder). The kernel
drops the lock when its holder closes it (:func:`release_uid`, after the child's sweep, which also removes the
file) or dies, so a crashed engine leaves no lease behind (only an unlocked file, taken over by the next). Each
engine tries a block of uids of its own first (chosen by its pid), so engines started one after another do not
even try the same uids, and a uid one of them released is not the next one another takes. Where no lease can be
taken (the directory cannot be made), a uid is still picked as before: none in use now, from the engine's own
block first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fresh_uid", "processes_of", "release_uid"]

_UID_BASE = 61000
_BLOCK, _BLOCKS = 64, 1024  # uids 61000-126535: a block of 64 per engine pid (mod 1024)
_uid_counter = itertools.count()
_leases: dict[int, tuple[int, Path]] = {}  # uid -> the open lock file that holds its lease, and its path


def _lease_dir() -> Path | None:
    """The folder of the leases: every engine of the host (root's: only root switches uids) shares it."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    path = base / ("ait-uids" if base == Path("/run") else f"ait-uids-{os.geteuid()}")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
    except OSError:
        return None
    # A folder someone else made (or a link planted in its place) holds no lease of ours.
    return path if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() else None


def _lease(uid: int) -> bool | None:
    """True: this engine now holds ``uid``'s lease; False: another holds it; None: no lease can be taken here."""
    where = _lease_dir()
    if where is None:
        return None
    try:
        # O_NOFOLLOW: a link planted under the uid's name is no lease (and no file written through it).
        path = where / str(uid)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return False if exc.errno == errno.ELOOP else None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # A holder removes the file before it lets go (release_uid): a lock taken on a file no longer under that
        # name, after another engine may have made a new one, is no lease.
        still = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except OSError:
        still = False
    if not still:
        os.close(fd)
        return False
    _leases[uid] = (fd, path)
    return True


def _candidates() -> Iterator[int]:
    """This engine's block of uids first (by its pid, so that engines started one after another use different
    blocks), from a point that moves on with each child; then the next blocks, in turn."""
    own, start = os.getpid() % _BLOCKS, next(_uid_counter)
    for k in range(_BLOCKS):
        first = _UID_BASE + (own + k) % _BLOCKS * _BLOCK
        for j in range(_BLOCK):
            yield first + (start + j) % _BLOCK


def fresh_uid() -> int:
    """An unprivileged uid that no process uses now and no other child holds: its lease is this engine's until
    :func:`release_uid`."""
    for uid in _candidates():
        if uid in _leases:
            continue  # one of this engine's own children has it
        leased = _lease(uid)
        if leased is False:
            continue  # another engine's child has it
        if processes_of(uid):  # a process of that uid that is no child of ours (or a straggler not yet gone)
            release_uid(uid)
            continue
        return uid
    raise RuntimeError(f"no free uid in {_UID_BASE}-{_UID_BASE + _BLOCKS * _BLOCK - 1}")


def release_uid(uid: int) -> None:
    """Give up the lease of ``uid`` (once its child's processes are gone); a uid not leased is ignored."""
    lease = _leases.pop(uid, None)
    if lease is not None:
        fd, path = lease
        with contextlib.suppress(OSError):
            path.unlink()  # before the lock goes: whoever locks this file after that sees it gone (see _lease)
        os.close(fd)


def processes_of(uid: int) -> list[int]:
    pids = []
    with os.scandir("/proc") as entries:  # closed even when a caller stops early (an unclosed one warns)
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid:
                        pids.append(int(entry.name))
    return pids
