"""What every sandboxed child shares: a bounded copy of its files, a scrubbed env, one way to fail.

(Its fresh unprivileged uid, and the processes that run under it, are in :mod:`adapters.sandbox.uids`.)

- :func:`copy_regular_files` copies a workspace or env package (regular files only, bounded), so the child
  never sees the original directory, its symlinks or anything beside it.
- :func:`child_env` builds the child's environment from nothing: no variable of the engine's environment
  (API keys, tokens, ``AIT_EVAL_KEY_FILE``) is passed on.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["ChildFailure", "child_env", "copy_regular_files"]

_COPY_MAX_BYTES = 64 << 20
_COPY_MAX_FILES = 2000


class ChildFailure(Exception):
    """The child timed out, died or broke the protocol; ``str(self)`` says which, for the agent."""


def copy_regular_files(src: Path, dst: Path) -> None:
    """Regular files only (no symlinks, devices or fifos), bounded in count and bytes."""
    total = count = 0
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not Path(dirpath, d).is_symlink())
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            count, total = count + 1, total + size
            if count > _COPY_MAX_FILES or total > _COPY_MAX_BYTES:
                raise ChildFailure(f"workspace too large to validate (> {_COPY_MAX_FILES} files or 64 MiB)")
            shutil.copyfile(path, dst / rel / name)


def child_env(home: str, tmp: str, python: Path) -> dict[str, str]:
    """Built from nothing: no variable of the engine's environment is passed on."""
    return {
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "UV_CACHE_DIR": f"{home}/.cache/uv",
        "UV_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
        "MALLOC_ARENA_MAX": "2",  # glibc reserves 64 MiB of address space per arena: keep RLIMIT_AS meaningful
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
