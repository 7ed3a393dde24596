"""``--unsafe-no-sandbox``: the one way to run agent code without bubblewrap, refused otherwise, and recorded.

:func:`add_flag` puts the flag on a command; :func:`check` runs before anything starts: without bubblewrap it
raises :class:`adapters.sandbox.WeakIsolation` (one line naming what is missing) unless the flag was given,
and with the flag it returns the ``run.sandbox_opted_out`` event the command records in its run (shown by
``ait report`` and ``ait watch``). :func:`trainer_opts` passes the opt-in on to the CPU trainer of local pods.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from adapters.sandbox import UNSAFE_FLAG, WeakIsolation, detect_isolation, require_confinement

if TYPE_CHECKING:
    from events import SandboxOptedOut

__all__ = ["WeakIsolation", "add_flag", "check", "trainer_opts"]


def add_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        UNSAFE_FLAG,
        dest="unsafe_no_sandbox",
        action="store_true",
        help="run agent code even where bubblewrap is unavailable (no filesystem confinement; recorded in the run)",
    )


def check(command: str, unsafe: bool) -> SandboxOptedOut | None:
    """Refuse (``WeakIsolation``) or, with the opt-in, the event to record; None when not opted out."""
    from events import SandboxOptedOut

    plan = detect_isolation()
    require_confinement(plan, unsafe=unsafe, who=f"ait {command}")
    if not unsafe:
        return None
    return SandboxOptedOut(command=f"ait {command}", isolation=plan.mode, note=plan.note)


def trainer_opts(opts: Mapping[str, str], unsafe: bool, trainer: str) -> dict[str, str]:
    """The local pods' trainer options, with the opt-in for the CPU trainer (the one that runs agent code)."""
    return {**opts, "unsafe_no_sandbox": "1"} if unsafe and trainer == "cpu" else dict(opts)
