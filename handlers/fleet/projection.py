"""The pod fleet projection: requested -> provisioning -> ready -> busy -> idle -> terminating -> gone, plus lost.

A pure fold of ``pod.*`` events, the job events that occupy and free a pod, and the money events whose ``ref``
names a pod (``pod:<pod_id>``: the GPU time reserved and settled for it). Busy and idle follow from the jobs:
``job.assigned`` makes a pod busy and the attempt's outcome makes it idle again at that record's time, so idle
time is measured on the log's clock and replays exactly.

``lost`` is a pod that died, stopped answering or failed its bootstrap while it still exists at the provider:
it is never given work again and is terminated. ``gone`` is final: terminated, or never created.
"""

from __future__ import annotations

from typing import Final

import msgspec

from engine.projection import Projection, handles
from events import (
    JobAssigned,
    JobFailed,
    JobRequeued,
    JobSucceeded,
    PodCreated,
    PodIdle,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodSelfChecked,
    PodTerminated,
    PodTerminating,
)
from events.money import CostRefused, CostReleased, CostReserved, CostSettled

__all__ = [
    "AVAILABLE",
    "BOOTING",
    "LIVE",
    "FleetProjection",
    "FleetState",
    "PodEntry",
    "available_pods",
    "by_gpu",
    "pod_of_ref",
    "pod_ref",
    "pods_in",
]

LIVE: Final = frozenset({"requested", "provisioning", "ready", "busy", "idle"})  # count against the pod cap
AVAILABLE: Final = frozenset({"ready", "idle"})  # may take a job
BOOTING: Final = frozenset({"requested", "provisioning"})
_REF = "pod:"


def pod_ref(pod_id: str) -> str:
    """The ``ref`` of the budget reservations that pay for a pod's GPU time."""
    return f"{_REF}{pod_id}"


def pod_of_ref(ref: str) -> str | None:
    return ref[len(_REF) :] if ref.startswith(_REF) else None


class PodEntry(msgspec.Struct, kw_only=True):
    pod_id: str
    status: str = "requested"
    provider: str = ""
    gpu_type: str = ""
    gpu_count: int = 1
    rung: int = 0
    key: str = ""  # the pod.requested key (the launch's idempotency key)
    provider_id: str = ""
    url: str = ""
    usd_per_hour: float = 0.0
    job_id: str = ""  # the job it runs (busy), or whose attempt was open when it was lost
    job_key: str = ""
    requested_ts: float = 0.0
    created_ts: float = 0.0  # billing starts (0: never created)
    ready_ts: float = 0.0
    idle_since: float = 0.0
    ended_ts: float = 0.0
    reason: str = ""  # why it was lost / terminated / failed
    terminate_key: str = ""
    reservation_id: str = ""  # the open reservation paying for its GPU time ("" = none open)
    charged_usd: float = 0.0  # GPU time settled for it so far
    draining: bool = False  # the budget refused its next chunk: no new work, terminate when idle
    jobs_done: int = 0
    adopted: bool = False
    self_check: str = ""  # "" (none reported) | passed | failed: <what failed>


class FleetState(msgspec.Struct, kw_only=True):
    pods: dict[str, PodEntry] = {}
    requested: int = 0  # pod.requested so far: the next pod id is f"p{requested}"
    counts: dict[str, int] = {}  # status -> pods
    stockouts: dict[str, float] = {}  # GPU type -> time of its last stock-out
    failures: dict[str, int] = {}  # provision failure kind -> count
    last_failure: str = ""
    last_failure_ts: float = 0.0
    budget_refusals: int = 0
    last_refusal: str = ""
    anomalies: int = 0


def pods_in(state: FleetState, statuses: frozenset[str]) -> list[PodEntry]:
    return sorted((p for p in state.pods.values() if p.status in statuses), key=lambda p: p.pod_id)


def available_pods(state: FleetState) -> list[PodEntry]:
    """Pods that may take a job: the one idle longest first (then by id), never a draining pod."""
    pods = (p for p in state.pods.values() if p.status in AVAILABLE and not p.draining)
    return sorted(pods, key=lambda p: (p.idle_since, p.pod_id))


def by_gpu(state: FleetState) -> dict[str, int]:
    """Live pods per GPU type."""
    out: dict[str, int] = {}
    for p in state.pods.values():
        if p.status in LIVE:
            out[p.gpu_type] = out.get(p.gpu_type, 0) + 1
    return dict(sorted(out.items()))


class FleetProjection(Projection[FleetState]):
    name = "fleet"
    state_type = FleetState

    def __init__(self) -> None:
        # How many pods name each job (pod.job_id): derived from the state, kept here and not in it, so the state
        # (its hash, its snapshots) stays what it was. An assignment must know whether another pod holds the job
        # (one pod per job) and an outcome that names no pod must find the one that does: without the count each
        # visited every pod, a replay's most common fleet work. Built from the state the first time a state object
        # is seen (a snapshot's, a fresh one) and kept by the two handlers that write a pod's job_id.
        self._holders: dict[str, int] = {}
        self._holders_of: FleetState | None = None

    def initial(self) -> FleetState:
        return FleetState()

    def _holders_in(self, state: FleetState) -> dict[str, int]:
        if self._holders_of is not state:
            holders: dict[str, int] = {}
            for p in state.pods.values():
                if p.job_id:
                    holders[p.job_id] = holders.get(p.job_id, 0) + 1
            self._holders, self._holders_of = holders, state
        return self._holders

    def _hold(self, state: FleetState, pod: PodEntry, job_id: str, key: str) -> None:
        holders = self._holders_in(state)
        if pod.job_id:
            self._let_go(state, pod)
        holders[job_id] = holders.get(job_id, 0) + 1
        pod.job_id, pod.job_key = job_id, key

    def _let_go(self, state: FleetState, pod: PodEntry) -> None:
        holders = self._holders_in(state)
        left = holders.get(pod.job_id, 0) - 1
        if left > 0:
            holders[pod.job_id] = left
        else:
            holders.pop(pod.job_id, None)
        pod.job_id = pod.job_key = ""

    def holders(self, state: FleetState, job_id: str) -> int:
        """How many pods name ``job_id`` (any status), in constant time."""
        return self._holders_in(state).get(job_id, 0)

    def _set(self, state: FleetState, pod: PodEntry, status: str) -> None:
        old = state.counts.get(pod.status, 0) - 1
        if old > 0:
            state.counts[pod.status] = old
        else:
            state.counts.pop(pod.status, None)
        state.counts[status] = state.counts.get(status, 0) + 1
        pod.status = status

    def _pod(self, state: FleetState, pod_id: str, allowed: frozenset[str]) -> PodEntry | None:
        pod = state.pods.get(pod_id)
        if pod is None or pod.status not in allowed:
            state.anomalies += 1
            return None
        return pod

    def _end(self, state: FleetState, pod: PodEntry, status: str, reason: str) -> None:
        self._set(state, pod, status)
        pod.reason = reason or pod.reason
        if status == "gone":
            pod.ended_ts = self.current.ts

    # -- launch ------------------------------------------------------------------------------------

    @handles(PodRequested)
    def _requested(self, state: FleetState, e: PodRequested) -> FleetState:
        state.requested += 1
        if e.pod_id in state.pods:
            state.anomalies += 1
            return state
        state.pods[e.pod_id] = PodEntry(
            pod_id=e.pod_id,
            provider=e.provider,
            gpu_type=e.gpu_type,
            gpu_count=e.gpu_count,
            rung=e.rung,
            key=e.key,
            requested_ts=self.current.ts,
            reservation_id=e.reservation_id,
        )
        state.counts["requested"] = state.counts.get("requested", 0) + 1
        return state

    @handles(PodCreated)
    def _created(self, state: FleetState, e: PodCreated) -> FleetState:
        pod = state.pods.get(e.pod_id)
        if pod is None:
            state.anomalies += 1
            return state
        pod.provider_id = pod.provider_id or e.provider_id
        pod.usd_per_hour = e.usd_per_hour or pod.usd_per_hour
        pod.adopted = pod.adopted or e.adopted
        if not pod.created_ts:
            pod.created_ts = self.current.ts
        if pod.status == "requested":
            self._set(state, pod, "provisioning")
        return state

    @handles(PodReady)
    def _ready(self, state: FleetState, e: PodReady) -> FleetState:
        pod = self._pod(state, e.pod_id, BOOTING)
        if pod is None:
            return state
        ts = self.current.ts
        pod.provider_id, pod.url = e.provider_id, e.url
        pod.gpu_type = e.gpu_type or pod.gpu_type
        pod.usd_per_hour = e.usd_per_hour or pod.usd_per_hour
        # No pod.created seen (a provider that answers ready at once): bill from the request, the safe side.
        pod.created_ts = pod.created_ts or pod.requested_ts
        pod.ready_ts = pod.idle_since = ts
        self._set(state, pod, "ready")
        return state

    @handles(PodSelfChecked)
    def _self_checked(self, state: FleetState, e: PodSelfChecked) -> FleetState:
        pod = self._pod(state, e.pod_id, BOOTING)
        if pod is not None:
            pod.self_check = "passed" if e.ok else f"failed: {', '.join(e.failed()) or 'unknown'}"
        return state

    @handles(PodProvisionFailed)
    def _failed(self, state: FleetState, e: PodProvisionFailed) -> FleetState:
        ts = self.current.ts
        state.failures[e.kind] = state.failures.get(e.kind, 0) + 1
        state.last_failure, state.last_failure_ts = f"{e.kind}: {e.detail}", ts
        gpu = e.gpu_type
        pod = self._pod(state, e.pod_id, BOOTING)
        if pod is None:
            if e.kind == "stock_out" and gpu:
                state.stockouts[gpu] = ts
            return state
        gpu = gpu or pod.gpu_type
        if e.kind == "stock_out" and gpu:
            state.stockouts[gpu] = ts
        pod.provider_id = pod.provider_id or e.provider_id
        # A pod that exists (a failed bootstrap) still bills: it is lost until terminated.
        self._end(state, pod, "lost" if pod.provider_id else "gone", f"provision_failed: {e.kind}")
        return state

    # -- work --------------------------------------------------------------------------------------

    @handles(JobAssigned)
    def _assigned(self, state: FleetState, e: JobAssigned) -> FleetState:
        pod = self._pod(state, e.pod_id, AVAILABLE)
        if pod is None:
            return state
        # Only when some pod names the job are the pods visited (a lost pod keeps its job's name, and only a live
        # holder forbids the assignment).
        if self.holders(state, e.job_id) and any(
            p.job_id == e.job_id and p.status in LIVE for p in state.pods.values()
        ):
            state.anomalies += 1  # the job's open attempt holds another pod: one pod per job
            return state
        self._hold(state, pod, e.job_id, e.key)
        self._set(state, pod, "busy")
        return state

    def _job_done(self, state: FleetState, job_id: str, key: str, pod_id: str, *, finished: bool) -> None:
        # The attempt's pod: named by the outcome, else found by its open job (at most one pod has it).
        pod = state.pods.get(pod_id) if pod_id else None
        if pod is None or pod.job_id != job_id:
            # The holder with the smallest id (what a sort by id would find first), without sorting every pod per
            # outcome (a replay folds one per job), and without visiting them when no pod names the job.
            pod = None
            if self.holders(state, job_id):
                for p in state.pods.values():
                    if p.job_id == job_id and (pod is None or p.pod_id < pod.pod_id):
                        pod = p
        if pod is None or (key and pod.job_key and key != pod.job_key):
            return  # no pod holds this attempt (it was lost and its job cleared): nothing to free
        self._let_go(state, pod)
        if finished:
            pod.jobs_done += 1
        if pod.status == "busy":
            pod.idle_since = self.current.ts
            self._set(state, pod, "idle")

    @handles(JobSucceeded)
    def _job_succeeded(self, state: FleetState, e: JobSucceeded) -> FleetState:
        self._job_done(state, e.job_id, e.key, e.pod_id, finished=True)
        return state

    @handles(JobFailed)
    def _job_failed(self, state: FleetState, e: JobFailed) -> FleetState:
        self._job_done(state, e.job_id, e.key, e.pod_id, finished=True)
        return state

    @handles(JobRequeued)
    def _job_requeued(self, state: FleetState, e: JobRequeued) -> FleetState:
        self._job_done(state, e.job_id, e.key, e.pod_id, finished=False)
        return state

    @handles(PodIdle)
    def _idle(self, state: FleetState, e: PodIdle) -> FleetState:
        pod = self._pod(state, e.pod_id, AVAILABLE)
        if pod is not None and pod.status == "ready":
            self._set(state, pod, "idle")
        return state

    # -- ending ------------------------------------------------------------------------------------

    @handles(PodLost)
    def _lost(self, state: FleetState, e: PodLost) -> FleetState:
        pod = self._pod(state, e.pod_id, LIVE)
        if pod is not None:
            self._end(state, pod, "lost", e.reason)
        return state

    @handles(PodTerminating)
    def _terminating(self, state: FleetState, e: PodTerminating) -> FleetState:
        pod = state.pods.get(e.pod_id)
        if pod is None:
            # An orphan found at the provider under this run's prefix with no history in this log.
            pod = state.pods[e.pod_id] = PodEntry(pod_id=e.pod_id, status="terminating", requested_ts=self.current.ts)
            state.counts["terminating"] = state.counts.get("terminating", 0) + 1
        else:
            # A gone pod is reopened when a pod with its name turns up at the provider (a create that failed
            # on our side but happened on theirs): it is terminated like any other.
            if pod.status == "gone":
                pod.provider_id = ""
            self._set(state, pod, "terminating")
        pod.provider_id = e.provider_id or pod.provider_id
        pod.terminate_key = e.key
        pod.reason = e.reason or pod.reason
        return state

    @handles(PodTerminated)
    def _terminated(self, state: FleetState, e: PodTerminated) -> FleetState:
        pod = self._pod(state, e.pod_id, frozenset({"terminating"}))
        if pod is None:
            return state
        self._end(state, pod, "gone", e.reason)
        pod.terminate_key = ""
        return state

    # -- money (GPU time paid per pod) -------------------------------------------------------------

    @handles(CostReserved)
    def _reserved(self, state: FleetState, e: CostReserved) -> FleetState:
        pod = state.pods.get(pod_of_ref(e.ref) or "")
        if pod is not None:  # the first chunk precedes pod.requested, which carries its id instead
            pod.reservation_id = e.reservation_id
        return state

    @handles(CostSettled)
    def _settled(self, state: FleetState, e: CostSettled) -> FleetState:
        pod = state.pods.get(pod_of_ref(e.ref) or "")
        if pod is not None:
            pod.charged_usd += e.usd
            if pod.reservation_id == e.reservation_id:
                pod.reservation_id = ""
        return state

    @handles(CostReleased)
    def _released(self, state: FleetState, e: CostReleased) -> FleetState:
        pod = state.pods.get(pod_of_ref(e.ref) or "")
        if pod is not None and pod.reservation_id == e.reservation_id:
            pod.reservation_id = ""
        return state

    @handles(CostRefused)
    def _refused(self, state: FleetState, e: CostRefused) -> FleetState:
        pod_id = pod_of_ref(e.ref)
        if pod_id is None:
            return state
        state.budget_refusals += 1
        state.last_refusal = e.message
        pod = state.pods.get(pod_id)
        if pod is not None and pod.status in LIVE:
            pod.draining = True
        return state
