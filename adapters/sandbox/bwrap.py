"""The bubblewrap command line: exactly what a sandboxed child sees of the host.

Read-only: the system directories (``/usr`` and its links), a few ``/etc`` files, the Python installation
and the venv, and what the caller binds (the probe: its driver and the copy of the workspace). Writable: a
size-capped ``/tmp`` and what the caller binds read-write. Nothing else of the host exists inside: not the
project tree (so not ``families``), not the run directories, not the installation key, not the real
workspace, not ``$HOME`` (an interpreter under a root-only home is bound back at its own path, in
directories any uid can traverse), not the host's unix sockets. Project packages that an install placed
inside the venv are covered by an empty tmpfs. New network, pid, ipc and uts namespaces; the environment is
cleared and rebuilt from the given variables only.

:func:`confined_base` is that common part (namespaces, environment, system directories, Python, scratch
``/tmp``); the probe adds its driver and workspace copy, and the CPU trainer's training child adds what
training needs (``adapters.cpu_trainer``).
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

__all__ = [
    "INSIDE",
    "PROJECT_PACKAGES",
    "BwrapArgs",
    "confined_base",
    "python_trees",
    "traversable",
]

PROJECT_PACKAGES = ("families", "handlers", "engine", "events", "adapters")
INSIDE = Path("/sandbox")  # where the caller's files appear under bubblewrap
_ETC = ("ld.so.cache", "localtime", "nsswitch.conf", "passwd", "group", "hosts", "ssl", "ca-certificates")


class BwrapArgs:
    """Builds a bubblewrap command line; parent directories are created world-traversable (0755)."""

    def __init__(self, bwrap: str = "bwrap") -> None:
        self.args: list[str] = [bwrap]
        self._made: set[Path] = {Path("/")}
        self._bound: list[Path] = []

    def _covered(self, path: Path) -> bool:
        return any(path == b or b in path.parents for b in self._bound)

    def _parents(self, dest: Path) -> None:
        # bwrap creates missing parents with mode 0700, which the unprivileged uid could not traverse.
        for parent in reversed(dest.parents):
            if parent not in self._made and not self._covered(parent):
                self.args += ["--perms", "0755", "--dir", str(parent)]
                self._made.add(parent)

    def bind(self, src: Path, dest: Path | None = None, *, ro: bool = True, try_: bool = False) -> None:
        dest = dest or src
        if self._covered(dest):
            return
        self._parents(dest)
        flag = ("--ro-bind" if ro else "--bind") + ("-try" if try_ else "")
        self.args += [flag, str(src), str(dest)]
        self._bound.append(dest)

    def tmpfs(self, dest: Path, size: int, perms: str) -> None:
        self._parents(dest)
        self.args += ["--perms", perms, "--size", str(size), "--tmpfs", str(dest)]
        self._made.add(dest)


def python_trees(python: Path) -> list[Path]:
    """The venv and the interpreter installation it points to (each read-only in the sandbox)."""
    trees = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), python.resolve().parent.parent}
    venv = python.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        trees.add(venv.resolve())
    return sorted(trees)


def traversable(path: Path) -> bool:
    """Whether any uid can reach and list ``path`` (o+x on every ancestor, o+rx on itself)."""
    try:
        if not path.stat().st_mode & stat.S_IROTH:
            return False
        return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])
    except OSError:
        return False


def _project_masks(trees: list[Path]) -> list[Path]:
    """Project packages that an install put inside a bound tree: hidden under an empty tmpfs."""
    masks = []
    for name in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            path = Path(loc).resolve()
            if any(t == path or t in path.parents for t in trees):
                masks.append(path)
    return masks


def confined_base(python: Path, env: dict[str, str], tmpfs_bytes: int, bwrap: str = "bwrap") -> BwrapArgs:
    """Namespaces, a cleared environment, the system directories, Python and the venv, /proc, /dev, /tmp.

    ``bwrap`` is the executable :func:`adapters.sandbox.detect_isolation` found (``IsolationPlan.bwrap``).
    """
    b = BwrapArgs(bwrap)
    b.args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    b.args += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in sorted(env.items()):
        b.args += ["--setenv", key, value]
    # The scratch /tmp goes first: the venv (or a clone of the project) may itself live under /tmp, and a
    # tmpfs mounted after its bind would hide it.
    b.tmpfs(Path("/tmp"), tmpfs_bytes, "01777")
    for top in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", top)
        if path.is_symlink():
            b.args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            b.bind(path)
    for name in _ETC:
        b.bind(Path("/etc", name), try_=True)
    trees = python_trees(python)
    for tree in trees:
        b.bind(tree)
    for mask in _project_masks(trees):
        b.args += ["--tmpfs", str(mask)]
    b.args += ["--proc", "/proc", "--dev", "/dev"]
    return b
