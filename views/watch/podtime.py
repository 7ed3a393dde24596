"""Pod time: how long each pod sat idle (ready with no job) and busy (running a job), on the log's clock.

A pod is idle from ``pod.ready`` or the end of its job until its next ``job.assigned``, busy from there to the
attempt's outcome, and off once lost, terminating or terminated. Open spans are closed at "now" by
:func:`gpu_time`, so the figure grows while a pod waits even when no event arrives for it.
"""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import (
    JobAssigned,
    JobFailed,
    JobRequeued,
    JobSucceeded,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodTerminated,
    PodTerminating,
)

__all__ = ["GpuTime", "PodTime", "PodTimeProjection", "PodTimeState", "gpu_time"]


class PodTime(msgspec.Struct, kw_only=True):
    gpu: str
    state: str = "off"  # off | idle | busy
    since: float = 0.0
    idle_s: float = 0.0
    busy_s: float = 0.0


class PodTimeState(msgspec.Struct, kw_only=True):
    pods: dict[str, PodTime] = {}
    job_pod: dict[str, str] = {}  # job id -> the pod of its open attempt


class GpuTime(msgspec.Struct, frozen=True, kw_only=True):
    idle_s: float
    busy_s: float


class PodTimeProjection(Projection[PodTimeState]):
    name = "pod_time"
    state_type = PodTimeState

    def initial(self) -> PodTimeState:
        return PodTimeState()

    def _enter(self, pod: PodTime, state: str) -> None:
        ts = self.current.ts
        if pod.state == "idle":
            pod.idle_s += ts - pod.since
        elif pod.state == "busy":
            pod.busy_s += ts - pod.since
        pod.state, pod.since = state, ts

    @handles(PodRequested)
    def _requested(self, s: PodTimeState, e: PodRequested) -> PodTimeState:
        s.pods.setdefault(e.pod_id, PodTime(gpu=e.gpu_type))
        return s

    @handles(PodReady)
    def _ready(self, s: PodTimeState, e: PodReady) -> PodTimeState:
        pod = s.pods.setdefault(e.pod_id, PodTime(gpu=e.gpu_type))
        pod.gpu = e.gpu_type or pod.gpu
        if pod.state == "off":
            self._enter(pod, "idle")
        return s

    @handles(JobAssigned)
    def _assigned(self, s: PodTimeState, e: JobAssigned) -> PodTimeState:
        s.job_pod[e.job_id] = e.pod_id
        pod = s.pods.get(e.pod_id)
        if pod is not None and pod.state != "off":
            self._enter(pod, "busy")
        return s

    def _done(self, s: PodTimeState, job_id: str, pod_id: str) -> PodTimeState:
        held = s.job_pod.pop(job_id, "")
        pod = s.pods.get(pod_id or held)
        if pod is not None and pod.state == "busy":
            self._enter(pod, "idle")
        return s

    @handles(JobSucceeded)
    def _succeeded(self, s: PodTimeState, e: JobSucceeded) -> PodTimeState:
        return self._done(s, e.job_id, e.pod_id)

    @handles(JobFailed)
    def _failed(self, s: PodTimeState, e: JobFailed) -> PodTimeState:
        return self._done(s, e.job_id, e.pod_id)

    @handles(JobRequeued)
    def _requeued(self, s: PodTimeState, e: JobRequeued) -> PodTimeState:
        return self._done(s, e.job_id, e.pod_id)

    @handles(PodLost, PodTerminating, PodTerminated, PodProvisionFailed)
    def _off(self, s: PodTimeState, e: PodLost | PodTerminating | PodTerminated | PodProvisionFailed) -> PodTimeState:
        pod = s.pods.get(e.pod_id)
        if pod is not None:
            self._enter(pod, "off")
        return s


def gpu_time(state: PodTimeState, now: float) -> dict[str, GpuTime]:
    """Idle and busy pod-seconds per GPU type, open spans counted up to ``now``."""
    acc: dict[str, list[float]] = {}
    for pod in state.pods.values():
        idle, busy = pod.idle_s, pod.busy_s
        if pod.state == "idle":
            idle += max(0.0, now - pod.since)
        elif pod.state == "busy":
            busy += max(0.0, now - pod.since)
        a = acc.setdefault(pod.gpu, [0.0, 0.0])
        a[0] += idle
        a[1] += busy
    return {gpu: GpuTime(idle_s=a[0], busy_s=a[1]) for gpu, a in sorted(acc.items())}
