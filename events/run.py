"""Run lifecycle events: the header of every log and the markers of resumes and the end."""

from __future__ import annotations

from typing import Any

from ._base import EventBody, event

__all__ = ["RunFinished", "RunResumed", "RunStarted", "RunWiring", "SandboxOptedOut"]


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


@event("run.wiring")
class RunWiring(EventBody, frozen=True, kw_only=True):
    """What this process of the run really uses, recorded at every start and resume (``ait report`` shows it at
    the top): a stand-in trainer or an offline learner is never mistaken for the real thing afterwards."""

    inner_trainer: str  # the pod trainer of inner jobs: "prime_rl", "cpu", "standin", ...
    learner_backend: str  # "tinker" | "offline"
    provider: str  # where inner jobs' pods run: "local" | "runpod" | "sim"
    agent: str = ""  # "tinker" | "scripted"
    validator: str = ""  # "probe" | "job_config"
    standin: bool = False  # the inner scores are made up (the stand-in trainer or the sim provider's agents)
    steps: int = 0  # the outer steps this process runs the run to (`ait resume --max-steps N` moves it); 0: none


@event("run.sandbox_opted_out")
class SandboxOptedOut(EventBody, frozen=True, kw_only=True):
    """The user passed ``--unsafe-no-sandbox``: agent code may run without bubblewrap in this run.

    ``isolation`` is what this machine allows (``bwrap`` | ``unshare`` | ``none``: the opt-in only matters
    when it is not ``bwrap``); ``note`` why nothing stronger; ``command`` the ``ait`` command that opted out.
    """

    command: str
    isolation: str
    note: str = ""
