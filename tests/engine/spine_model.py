"""Test-only projections over the run/job/pod/cost events, a plain-dict model of the same facts, and a
deterministic event stream, shared by the engine tests, the crash child and the golden-log test.

The projections go through the engine (``Projection`` + ``@handles``); the model is written separately
with plain dicts and ``isinstance`` so that a bug in the dispatch or the fold shows up as a difference.
"""

from __future__ import annotations

from typing import Any

from engine.projection import Projection, handles
from events import (
    CostReserved,
    CostSettled,
    EventBody,
    JobFailed,
    JobQueued,
    JobStarted,
    JobSucceeded,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    Recorded,
)


class JobsProjection(Projection[dict[str, str]]):
    """job id -> status."""

    name = "t_jobs"
    state_type = dict[str, str]

    def initial(self) -> dict[str, str]:
        return {}

    @handles(JobQueued)
    def queued(self, state: dict[str, str], ev: JobQueued) -> dict[str, str]:
        state[ev.job_id] = "queued"
        return state

    @handles(JobStarted)
    def started(self, state: dict[str, str], ev: JobStarted) -> dict[str, str]:
        state[ev.job_id] = f"running@{ev.pod_id}"
        return state

    @handles(JobSucceeded)
    def succeeded(self, state: dict[str, str], ev: JobSucceeded) -> dict[str, str]:
        state[ev.job_id] = f"succeeded:{ev.post}"
        return state

    @handles(JobFailed)
    def failed(self, state: dict[str, str], ev: JobFailed) -> dict[str, str]:
        state[ev.job_id] = f"failed:{ev.reason}"
        return state


class MoneyProjection(Projection[dict[str, float]]):
    """ "reserved:<kind>" and "settled:<kind>" -> USD, and "events" -> how many money events (with seq)."""

    name = "t_money"
    state_type = dict[str, float]
    wants_record = True

    def initial(self) -> dict[str, float]:
        return {}

    @handles(CostReserved)
    def reserved(self, state: dict[str, float], ev: CostReserved) -> dict[str, float]:
        key = f"reserved:{ev.kind}"
        state[key] = state.get(key, 0.0) + ev.usd
        state["last_seq"] = float(self.current.seq)
        return state

    @handles(CostSettled)
    def settled(self, state: dict[str, float], ev: CostSettled) -> dict[str, float]:
        key = f"settled:{ev.kind}"
        state[key] = state.get(key, 0.0) + ev.usd
        state["last_seq"] = float(self.current.seq)
        return state


class PodsProjection(Projection[dict[str, str]]):
    """pod id -> status (pod.requested is a side-effect request; ready / provision_failed its outcomes)."""

    name = "t_pods"
    state_type = dict[str, str]

    def initial(self) -> dict[str, str]:
        return {}

    @handles(PodRequested)
    def requested(self, state: dict[str, str], ev: PodRequested) -> dict[str, str]:
        state[ev.pod_id] = "requested"
        return state

    @handles(PodReady)
    def ready(self, state: dict[str, str], ev: PodReady) -> dict[str, str]:
        state[ev.pod_id] = f"ready:{ev.provider_id}"
        return state

    @handles(PodProvisionFailed)
    def provision_failed(self, state: dict[str, str], ev: PodProvisionFailed) -> dict[str, str]:
        state[ev.pod_id] = f"failed:{ev.kind}"
        return state

    @handles(PodLost)
    def lost(self, state: dict[str, str], ev: PodLost) -> dict[str, str]:
        state[ev.pod_id] = "lost"
        return state


def projections() -> list[Projection[Any]]:
    return [JobsProjection(), MoneyProjection(), PodsProjection()]


class Model:
    """The same facts as the projections, kept with plain dicts (plus the pending request keys)."""

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}
        self.money: dict[str, float] = {}
        self.pods: dict[str, str] = {}
        self.pending: dict[str, int] = {}  # request key -> seq
        self.count = 0

    def apply(self, seq: int, body: EventBody) -> None:
        assert seq == self.count, f"model fed seq {seq}, expected {self.count}"
        self.count += 1
        if isinstance(body, JobQueued):
            self.jobs[body.job_id] = "queued"
        elif isinstance(body, JobStarted):
            self.jobs[body.job_id] = "running@" + body.pod_id
        elif isinstance(body, JobSucceeded):
            self.jobs[body.job_id] = "succeeded:" + str(body.post)
        elif isinstance(body, JobFailed):
            self.jobs[body.job_id] = "failed:" + body.reason
        elif isinstance(body, (CostReserved, CostSettled)):
            prefix = "reserved:" if isinstance(body, CostReserved) else "settled:"
            self.money[prefix + body.kind] = self.money.get(prefix + body.kind, 0.0) + body.usd
            self.money["last_seq"] = float(seq)
        elif isinstance(body, PodRequested):
            self.pods[body.pod_id] = "requested"
            self.pending[body.key] = seq
        elif isinstance(body, (PodReady, PodProvisionFailed)):
            self.pods[body.pod_id] = (
                "ready:" + body.provider_id if isinstance(body, PodReady) else "failed:" + body.kind
            )
            self.pending.pop(body.key, None)
        elif isinstance(body, PodLost):
            self.pods[body.pod_id] = "lost"

    def states(self) -> dict[str, Any]:
        return {"t_jobs": self.jobs, "t_money": self.money, "t_pods": self.pods}


def live_states(states: dict[str, Any]) -> dict[str, Any]:
    """The test projections' part of a runtime's (or a fold's) states, comparable to :meth:`Model.states`."""
    return {name: states[name] for name in ("t_jobs", "t_money", "t_pods")}


def fold_all(projs: list[Projection[Any]], records: list[Recorded]) -> dict[str, Any]:
    """A rebuild from the log with the public ``Projection.fold``."""
    return {p.name: p.fold(records) for p in projs}


def body_for(n: int, run_id: str = "run") -> EventBody:
    """A deterministic event for position ``n`` of a stream: jobs move through their life, money flows,
    pods are requested and answered (so some requests stay pending). Pod request keys are filled by the
    runtime as ``<run_id>:<seq>``; an outcome answers the request made two events earlier (seq n - 2)."""
    job = f"job-{n // 6}"
    match n % 6:
        case 0:
            return JobQueued(
                job_id=job, episode_id=f"ep-{n // 12}", family="calc_chain", base_model="tiny", bundle="b" * 64
            )
        case 1:
            return CostReserved(reservation_id=f"r{n}", kind="job", ref=job, usd=0.25 * (n % 7))
        case 2:
            return PodRequested(pod_id=f"pod-{n}", gpu_type="H100", provider="local")
        case 3:
            return JobStarted(job_id=job, pod_id=f"pod-{n - 1}")
        case 4:
            req_seq = n - 2
            if n % 4 == 0:
                return PodReady(
                    key=f"{run_id}:{req_seq}", pod_id=f"pod-{req_seq}", provider_id=f"p{req_seq}", url="http://x"
                )
            return PodProvisionFailed(key=f"{run_id}:{req_seq}", pod_id=f"pod-{req_seq}", kind="stock_out")
        case _:
            if n % 12 == 5:
                return JobSucceeded(job_id=job, pre=0.1, post=0.5 + (n % 5) / 10, train_seconds=3.0)
            return CostSettled(reservation_id=f"r{n - 4}", kind="job", ref=job, usd=0.1 * (n % 9), seconds=2.0)
