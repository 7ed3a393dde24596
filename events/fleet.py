"""Pod fleet events. A pod request is a side effect: ``pod.requested`` -> ``pod.ready`` | ``pod.provision_failed``."""

from __future__ import annotations

from ._base import EventBody, Outcome, Request, event

__all__ = ["PodIdle", "PodLost", "PodProvisionFailed", "PodReady", "PodRequested", "PodTerminated"]


@event("pod.requested")
class PodRequested(Request, frozen=True, kw_only=True):
    pod_id: str
    gpu_type: str
    provider: str


@event("pod.provision_failed")
class PodProvisionFailed(Outcome, frozen=True, kw_only=True):
    pod_id: str
    kind: str  # "stock_out" | "quota" | "error"
    detail: str = ""


@event("pod.ready")
class PodReady(Outcome, frozen=True, kw_only=True):
    pod_id: str
    provider_id: str
    url: str


@event("pod.idle")
class PodIdle(EventBody, frozen=True, kw_only=True):
    pod_id: str


@event("pod.lost")
class PodLost(EventBody, frozen=True, kw_only=True):
    pod_id: str
    reason: str


@event("pod.terminated")
class PodTerminated(EventBody, frozen=True, kw_only=True):
    pod_id: str
    reason: str = ""
