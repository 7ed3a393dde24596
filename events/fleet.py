"""Pod fleet events.

Two side effects, each ``XRequested(key)`` -> effect -> outcome:

- launching a pod: ``pod.requested`` -> (``pod.created`` once the provider has it) -> ``pod.ready`` |
  ``pod.provision_failed``;
- terminating a pod: ``pod.terminating`` -> ``pod.terminated``.

``pod.self_checked`` records the pod agent's check of its machine (GPU, the trainer stack at the pinned
revisions, this project's version) before its first job: a pod whose check failed is never given work
(``pod.provision_failed`` kind ``self_check`` follows, naming what failed). An agent whose trainer needs no
GPU stack checks nothing, and no ``pod.self_checked`` is written for it.

``pod.lost`` records that a pod died or stopped answering; ``pod.idle`` that it has no job (the fleet
projection also derives idleness from the job's outcome).
"""

from __future__ import annotations

import msgspec

from ._base import EventBody, Outcome, Request, event

__all__ = [
    "PodCheck",
    "PodCreated",
    "PodIdle",
    "PodLost",
    "PodProvisionFailed",
    "PodReady",
    "PodRequested",
    "PodSelfChecked",
    "PodTerminated",
    "PodTerminating",
]


@event("pod.requested")
class PodRequested(Request, frozen=True, kw_only=True):
    pod_id: str
    gpu_type: str
    provider: str
    rung: int = 0  # position of gpu_type on the GPU preference ladder
    gpu_count: int = 1  # GPUs in the pod (a rung "2x <type>" asks for two)
    reservation_id: str = ""  # the budget reservation covering its first chunk of GPU time
    pins: dict[str, str] = {}  # the exact revisions the pod is bootstrapped with (prime-rl, verifiers, ...)


@event("pod.created")
class PodCreated(EventBody, frozen=True, kw_only=True):
    """The provider accepted the launch (billing starts); the pod agent is not answering yet."""

    pod_id: str
    provider_id: str
    usd_per_hour: float = 0.0
    adopted: bool = False  # found by name at the provider while reconciling, not returned by our create


class PodCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One item of a pod's self-check: what was checked, whether it held, what was found or why not."""

    name: str  # gpu | prime_rl_commit | prime_rl_import | vllm | scoring | ait | bootstrap | trainer
    ok: bool
    detail: str = ""


@event("pod.self_checked")
class PodSelfChecked(EventBody, frozen=True, kw_only=True):
    """The pod agent's self-check finished (it takes jobs only if ``ok``)."""

    pod_id: str
    ok: bool
    checks: list[PodCheck] = []
    duration_s: float = 0.0

    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]

    def summary(self) -> str:
        """One line: the failed checks with their details, else what every check found."""
        shown = [c for c in self.checks if not c.ok] or self.checks
        return "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in shown)


@event("pod.provision_failed")
class PodProvisionFailed(Outcome, frozen=True, kw_only=True):
    pod_id: str
    kind: str  # "stock_out" | "quota" | "auth" | "unavailable" | "invalid" | "bootstrap" | "self_check" | "error"
    detail: str = ""
    gpu_type: str = ""
    provider_id: str = ""  # set when a pod exists (a failed bootstrap): it must still be terminated


@event("pod.ready")
class PodReady(Outcome, frozen=True, kw_only=True):
    pod_id: str
    provider_id: str
    url: str
    gpu_type: str = ""
    usd_per_hour: float = 0.0


@event("pod.idle")
class PodIdle(EventBody, frozen=True, kw_only=True):
    pod_id: str


@event("pod.lost")
class PodLost(EventBody, frozen=True, kw_only=True):
    pod_id: str
    reason: str


@event("pod.terminating")
class PodTerminating(Request, frozen=True, kw_only=True):
    pod_id: str
    provider_id: str = ""
    reason: str = ""  # idle_ttl | lost | drained | orphan | bootstrap | budget | ...


@event("pod.terminated")
class PodTerminated(Outcome, frozen=True, kw_only=True):
    key: str = ""  # the pod.terminating key ("" when no termination was requested)
    pod_id: str
    reason: str = ""
