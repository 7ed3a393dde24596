"""Which isolation this machine allows for agent-written code, detected once per process.

Three levels, strongest first:

- ``bwrap``: bubblewrap makes a new mount, network, pid, ipc and uts namespace whose filesystem holds only
  the system directories, the Python installation and the venv (all read-only), the driver, a read-only copy
  of the workspace and small tmpfs HOME and /tmp. The project tree, the run directory, the installation key
  and the hidden eval are simply absent. No network (only a loopback of its own).
- ``unshare``: util-linux ``unshare`` gives the network and pid namespaces but no filesystem confinement
  (files are protected by unix permissions only, since the child runs as another uid).
- ``none``: a plain child process; only the rlimits, the uid switch, the scrubbed environment and the
  wall timeout apply.

When the engine runs as root, the child switches to a fresh unprivileged uid before any agent code runs:
root ignores ``RLIMIT_NPROC``, so without the switch a fork bomb would not be bounded.
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

__all__ = ["IsolationPlan", "Mode", "detect_isolation", "is_root"]

log = structlog.get_logger(__name__)

Mode = Literal["bwrap", "unshare", "none"]
_ORDER: tuple[Mode, ...] = ("bwrap", "unshare", "none")


class IsolationPlan(msgspec.Struct, frozen=True, kw_only=True):
    mode: Mode
    switch_uid: bool  # the engine is root: the child drops to an unprivileged uid of its own
    note: str = ""  # why a stronger mode was not used ("" for bwrap)


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


def _try_bwrap() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap not installed (apt-get install -y bubblewrap)"
    true = shutil.which("true") or "/bin/true"
    flags = ["--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc"]
    return _works([bwrap, *flags, "--dev", "/dev", "--", true])


def unshare_flags() -> list[str]:
    user = [] if is_root() else ["--user", "--map-root-user"]
    return [*user, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]


def _try_unshare() -> str:
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) not installed"
    return _works([unshare, *unshare_flags(), "--", shutil.which("true") or "/bin/true"])


@functools.cache
def detect_isolation(prefer: Mode | Literal["auto"] = "auto") -> IsolationPlan:
    """The strongest isolation available, starting at ``prefer`` (tests force weaker modes with it)."""
    start = 0 if prefer == "auto" else _ORDER.index(prefer)
    notes: list[str] = []
    if prefer != "auto" and start > 0:
        notes.append(f"{prefer} requested")
    probes: dict[Mode, Callable[[], str]] = {"bwrap": _try_bwrap, "unshare": _try_unshare, "none": str}
    for mode in _ORDER[start:]:
        why = probes[mode]()
        if not why:
            plan = IsolationPlan(mode=mode, switch_uid=is_root(), note="; ".join(notes))
            log.info("probe.isolation_detected", mode=mode, switch_uid=plan.switch_uid, note=plan.note)
            return plan
        notes.append(why)
    raise AssertionError("unreachable: mode 'none' always works")
