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

if TYPE_CHECKING:
    from adapters.sandbox import IsolationPlan
    from events import SandboxOptedOut

__all__ = ["FLAG", "add_flag", "check", "trainer_opts"]

# adapters.sandbox.UNSAFE_FLAG, spelled here so that building the parser (`ait --help`) imports no sandbox code
# (tests/cli/test_bad_inputs.py checks the two agree).
FLAG = "--unsafe-no-sandbox"


def detect_isolation() -> IsolationPlan:
    """adapters.sandbox.detect_isolation, imported when a command checks (tests replace this one)."""
    from adapters.sandbox import detect_isolation as detect

    return detect()


def __getattr__(name: str) -> object:
    if name == "WeakIsolation":  # re-exported lazily, for the same reason
        from adapters.sandbox import WeakIsolation

        return WeakIsolation
    raise AttributeError(name)


def add_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        FLAG,
        dest="unsafe_no_sandbox",
        action="store_true",
        help="run agent code even where bubblewrap is unavailable (no filesystem confinement; recorded in the run)",
    )


def check(command: str, unsafe: bool) -> SandboxOptedOut | None:
    """Refuse (``WeakIsolation``) or, with the opt-in, the event to record; None when not opted out."""
    from adapters.sandbox import require_confinement
    from events import SandboxOptedOut

    plan = detect_isolation()
    require_confinement(plan, unsafe=unsafe, who=f"ait {command}")
    if not unsafe:
        return None
    return SandboxOptedOut(command=f"ait {command}", isolation=plan.mode, note=plan.note)


def trainer_opts(opts: Mapping[str, str], unsafe: bool, trainer: str) -> dict[str, str]:
    """The local pods' trainer options, with the opt-in for the CPU trainer (the one that runs agent code)."""
    return {**opts, "unsafe_no_sandbox": "1"} if unsafe and trainer == "cpu" else dict(opts)
