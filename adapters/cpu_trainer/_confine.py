"""The confinement of the CPU trainer's training child: what it sees, as whom it runs, how it is started.

The training child runs the agent's env code (its ``load()``, tools and rewards), so it gets the validation
probe's isolation (:func:`adapters.sandbox.detect_isolation`, strongest first), built from the same
shared pieces (:mod:`adapters.sandbox`):

- ``bwrap``: the shared bubblewrap base (:func:`adapters.sandbox.confined_base`: new net/pid/ipc/uts
  namespaces, system directories, Python and the venv read-only, a scratch ``/tmp``) plus, read-only, the
  project's code packages (``adapters``, ``families``, ``handlers``, ``events``, ``engine``: code only), the
  base checkpoint directory, a copy of the env package and the child's request; read-write only its output
  directory and a tmpfs HOME. Not there: the installation key, ``~/.config/ait``, the project tree (tests,
  fixtures, ``runs/``), the job bundle, anything the scoring side reads.
- ``unshare`` / ``none`` (only with the ``--unsafe-no-sandbox`` opt-in; the trainer refuses them otherwise):
  the same files at their real paths; no filesystem confinement, so when the
  engine is root the child drops to a fresh unprivileged uid (the key file is 0600 in a 0700 directory, so
  it cannot read it) and every process of that uid is killed at the end.

Always: a scrubbed environment built from nothing (no ``AIT_EVAL_KEY_FILE``, no token), with
``AIT_EVAL_KEY_SEALED=1`` so ``families`` refuses to load or create a key in that process; rlimits and
``PR_SET_NO_NEW_PRIVS`` applied by the child before any agent code runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import msgspec

from adapters.sandbox import (
    INSIDE,
    PROJECT_PACKAGES,
    BwrapArgs,
    IsolationPlan,
    child_env,
    confined_base,
    copy_regular_files,
    fresh_uid,
    python_trees,
    traversable,
    unshare_flags,
)
from families import EVAL_KEY_SEAL_ENV as SEAL_VAR

__all__ = ["ChildLimits", "Launch", "code_packages", "make_root", "prepare_launch", "zygote_argv"]

_MiB = 1 << 20
# The child's entry point: the project's code first on sys.path (``-I`` ignores PYTHONPATH), and this package
# registered without running its ``__init__`` (which imports torch, transformers and verifiers for the trainer's
# API): the child imports the agent's env first, so an env that cannot even be imported fails in seconds.
_BOOT = (
    "import sys, types; {inserts}; "
    "pkg = types.ModuleType('adapters.cpu_trainer'); pkg.__path__ = [{pkg!r}]; "
    "sys.modules['adapters.cpu_trainer'] = pkg; "
    "{entry}"
)
_CHILD_ENTRY = "from adapters.cpu_trainer._child import main; sys.exit(main(sys.argv[1:]))"
_ZYGOTE_ENTRY = "from adapters.cpu_trainer._zygote import main; main()"


def _boot(code_roots: list[str], entry: str = _CHILD_ENTRY) -> str:
    inserts = "; ".join(f"sys.path.insert(0, {r!r})" for r in reversed(code_roots))
    return _BOOT.format(inserts=inserts, pkg=str(Path(code_roots[0]) / "adapters" / "cpu_trainer"), entry=entry)


class ChildLimits(msgspec.Struct, frozen=True, kw_only=True):
    """rlimits for the training child (generous: torch maps a lot of address space and runs threads)."""

    memory_bytes: int = 16384 * _MiB  # RLIMIT_AS per process
    # RLIMIT_NPROC (processes + threads), only with a uid of its own: torch and asyncio use a few dozen; a fork
    # bomb stops well before the hundreds it would reach as root.
    nproc: int = 128
    fsize_bytes: int = 1024 * _MiB  # RLIMIT_FSIZE: the trained weights are a few MiB
    nofile: int = 1024
    tmpfs_bytes: int = 512 * _MiB  # bubblewrap's /tmp and HOME


class Launch(msgspec.Struct, frozen=True, kw_only=True):
    """A prepared child: its command line and environment, and the paths as the child sees them."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    isolation: str  # bwrap | unshare | none
    note: str  # why a stronger isolation was not used, and what that means ("" under bwrap)
    uid: int | None  # the unprivileged uid the child drops to (None: it keeps the engine's)
    inside_checkpoint: str
    inside_env: str
    inside_out: str
    inside_request: str
    rlimits: dict[str, int]


def code_packages() -> dict[str, Path]:
    """The project's code packages as imported here (an editable checkout or an installed copy)."""
    found: dict[str, Path] = {}
    for name in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(name)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if locations:
            found[name] = Path(locations[0]).resolve()
    return found


def _rlimits(limits: ChildLimits, uid: int | None) -> dict[str, int]:
    out = {
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_FSIZE": limits.fsize_bytes,
        "RLIMIT_NOFILE": limits.nofile,
    }
    if uid is not None:  # RLIMIT_NPROC counts every process of the uid: only meaningful on a uid of its own
        out["RLIMIT_NPROC"] = limits.nproc
    return out


def _env(home: str, tmp: str, python: Path, threads: int) -> dict[str, str]:
    env = child_env(home, tmp, python)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    env[SEAL_VAR] = "1"
    return env


def prepare_launch(
    plan: IsolationPlan,
    root: Path,
    env_src: Path,
    checkpoint: Path,
    *,
    threads: int,
    limits: ChildLimits | None = None,
    python: Path | None = None,
) -> Launch:
    """Lay out ``root`` (``env/`` and ``base/`` copies, ``out/``, ``home/``) and build the command for ``plan``.

    The checkpoint is copied (a few MiB) so that the child's uid can read it wherever it lies (a private
    temporary directory, say) and so that nothing of the original directory is exposed.

    ``root`` must be a fresh directory of the trainer's own; the caller writes the request to
    ``root/request.json`` (read-only for the child) before starting it.
    """
    limits = limits or ChildLimits()
    python = python or Path(sys.executable)
    # Under its own name: an env directory that is itself the package is imported by that name.
    copy_regular_files(env_src, root / "env" / env_src.name)
    copy_regular_files(checkpoint, root / "base")
    for name in ("out", "home"):
        (root / name).mkdir()
    packages = code_packages()
    if plan.mode == "bwrap":
        uid = fresh_uid() if plan.switch_uid else None
        _own(root, uid)
        b = _confined(plan, python, threads, limits, packages)
        b.bind(root / "base", INSIDE / "base")
        b.bind(root / "env", INSIDE / "env")
        b.bind(root / "request.json", INSIDE / "request.json")
        b.bind(root / "out", INSIDE / "out", ro=False)
        b.tmpfs(INSIDE / "home", limits.tmpfs_bytes, "0777")
        boot = _boot([str(INSIDE / "code")])
        b.args += ["--chdir", str(INSIDE / "home"), "--", str(python), "-I", "-B", "-c", boot]
        b.args += [str(INSIDE / "request.json")]
        return Launch(
            argv=b.args,
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            isolation="bwrap",
            note=plan.note,
            uid=uid,
            inside_checkpoint=str(INSIDE / "base"),
            inside_env=str(INSIDE / "env" / env_src.name),
            inside_out=str(INSIDE / "out"),
            inside_request=str(INSIDE / "request.json"),
            rlimits=_rlimits(limits, uid),
        )
    # No filesystem confinement: the child sees the real paths; a uid of its own keeps it out of root's files.
    code_roots = sorted({str(path.parent) for path in packages.values()})
    uid, note = None, plan.note
    if plan.switch_uid:
        needed = [*python_trees(python), *(Path(c) for c in code_roots)]
        blocked = [p for p in needed if not traversable(p)]
        if blocked:
            note = _join(note, f"child stays root (can read root's files): {blocked[0]} is private to root")
        else:
            uid = fresh_uid()
    else:
        note = _join(note, "child runs as the engine's own user: it could read that user's files (the key)")
    _own(root, uid)
    adapters_root = str(packages["adapters"].parent)  # the roots' first entry is searched first
    boot = _boot([adapters_root, *(r for r in code_roots if r != adapters_root)])
    argv = [str(python), "-I", "-B", "-c", boot, str(root / "request.json")]
    if plan.mode == "unshare":
        argv = [shutil.which("unshare") or "unshare", *unshare_flags(), "--", *argv]
    return Launch(
        argv=argv,
        env=_env(str(root / "home"), str(root / "home"), python, threads),
        cwd=str(root / "home"),
        isolation=plan.mode,
        note=note,
        uid=uid,
        inside_checkpoint=str(root / "base"),
        inside_env=str(root / "env" / env_src.name),
        inside_out=str(root / "out"),
        inside_request=str(root / "request.json"),
        rlimits=_rlimits(limits, uid),
    )


def _confined(
    plan: IsolationPlan, python: Path, threads: int, limits: ChildLimits, packages: dict[str, Path]
) -> BwrapArgs:
    """The bubblewrap base both paths share: namespaces, scrubbed sealed env, system, Python, code packages."""
    env = _env(str(INSIDE / "home"), "/tmp", python, threads)
    b = confined_base(python, env, limits.tmpfs_bytes, plan.bwrap or "bwrap")
    for name, path in sorted(packages.items()):
        b.bind(path, INSIDE / "code" / name)
    return b


def zygote_argv(plan: IsolationPlan, spool: Path, *, threads: int, limits: ChildLimits, python: Path) -> list[str]:
    """The warm zygote's bubblewrap command: the cold child's confinement, the job spool instead of one job's files.

    The spool (the directory the trainer makes each job's directory in) is bound read-write at
    ``/sandbox/spool``; the zygote never runs agent code, and each forked child binds only its own job's
    ``base``, ``env``, ``request.json`` and ``out`` at the cold child's paths, then hides the spool
    (:mod:`._zygote`). Here those paths are empty mount points.
    """
    if plan.mode != "bwrap":
        raise ValueError(f"the warm training zygote needs bubblewrap ({plan.mode} here)")
    b = _confined(plan, python, threads, limits, code_packages())
    b.bind(spool, INSIDE / "spool", ro=False)
    for name in ("base", "env", "out"):
        b.tmpfs(INSIDE / name, 4096, "0755")
    b.bind(Path("/dev/null"), INSIDE / "request.json")
    b.tmpfs(INSIDE / "home", limits.tmpfs_bytes, "0777")
    b.args += ["--chdir", "/", "--", str(python), "-I", "-B", "-c", _boot([str(INSIDE / "code")], _ZYGOTE_ENTRY)]
    return b.args


def _own(root: Path, uid: int | None) -> None:
    """``root`` traversable, its inputs read-only for the child; ``out`` and ``home`` the child's own."""
    root.chmod(0o755)
    for tree in ("env", "base"):  # whatever this process's umask: readable by the child
        for dirpath, _dirs, files in os.walk(root / tree):
            Path(dirpath).chmod(0o755)
            for name in files:
                Path(dirpath, name).chmod(0o644)
    if uid is None:
        return
    for name in ("out", "home"):
        os.chown(root / name, uid, uid)
        (root / name).chmod(0o700)


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def make_root(parent: Path | None) -> Path:
    """A fresh directory for one job's child (under ``parent``, else the system's temporary directory)."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="ait-cpu-job-", dir=parent))
