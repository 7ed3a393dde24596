"""Pod fleet events.

Two side effects, each ``XRequested(key)`` -> effect -> outcome:

- launching a pod: ``pod.requested`` -> (``pod.created`` once the provider has it) -> ``pod.ready`` |
  ``pod.provision_failed``;
- terminating a pod: ``pod.terminating`` -> ``pod.terminated``.

``pod.lost`` records that a pod died or stopped answering; ``pod.idle`` that it has no job (the fleet
projection also derives idleness from the job's outcome).
"""

from __future__ import annotations

from ._base import EventBody, Outcome, Request, event

__all__ = [
    "PodCreated",
    "PodIdle",
    "PodLost",
    "PodProvisionFailed",
    "PodReady",
    "PodRequested",
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


@event("pod.provision_failed")
class PodProvisionFailed(Outcome, frozen=True, kw_only=True):
    pod_id: str
    kind: str  # "stock_out" | "quota" | "auth" | "unavailable" | "invalid" | "bootstrap" | "error"
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
