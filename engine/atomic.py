"""Atomic file replacement: temp file in the same directory -> fsync -> rename -> fsync the directory.

A reader sees the old file or the new one, never a mix; after a crash, the rename is either durable with
the new bytes or not there at all (Pillai et al., OSDI'14: fsync the directory after a rename).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["fsync_dir", "write_atomic"]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path | str, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically and durably. Each call has its own temp file, so two
    writers racing on one path never interleave into one file (the last rename wins)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(p.parent)
    return p
