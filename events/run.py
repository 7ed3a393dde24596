"""Run lifecycle events: the header of every log and the markers of resumes and the end."""

from __future__ import annotations

from typing import Any

from ._base import EventBody, event

__all__ = ["RunFinished", "RunResumed", "RunStarted", "SandboxOptedOut"]


@event("run.started")
class RunStarted(EventBody, frozen=True, kw_only=True):
    """Line 0 of every log: everything needed to reproduce the run's decisions."""

    run_id: str
    seed: int
    code_version: str
    config: dict[str, Any] = {}
    key_fingerprint: str = ""


@event("run.resumed")
class RunResumed(EventBody, frozen=True, kw_only=True):
    """A process reopened the log and carried on from ``from_seq``."""

    from_seq: int
    recovered_torn_bytes: int = 0
    code_version: str = ""


@event("run.finished")
class RunFinished(EventBody, frozen=True, kw_only=True):
    status: str  # "ok" | "failed" | "cancelled" | "budget_exhausted"
    reason: str = ""


@event("run.sandbox_opted_out")
class SandboxOptedOut(EventBody, frozen=True, kw_only=True):
    """The user passed ``--unsafe-no-sandbox``: agent code may run without bubblewrap in this run.

    ``isolation`` is what this machine allows (``bwrap`` | ``unshare`` | ``none``: the opt-in only matters
    when it is not ``bwrap``); ``note`` why nothing stronger; ``command`` the ``ait`` command that opted out.
    """

    command: str
    isolation: str
    note: str = ""
