"""The fleet projection: pod lifecycle, busy/idle from jobs, GPU-time bookkeeping, and random-stream properties."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from events import (
    CostRefused,
    CostReserved,
    CostSettled,
    EventBody,
    JobAssigned,
    JobFailed,
    JobRequeued,
    JobSucceeded,
    PodCheck,
    PodCreated,
    PodIdle,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodSelfChecked,
    PodTerminated,
    PodTerminating,
    Recorded,
)
from handlers.fleet.projection import LIVE, FleetProjection, FleetState, available_pods, by_gpu

F = FleetProjection()


def fold(bodies: list[EventBody], state: FleetState | None = None) -> FleetState:
    return F.fold((Recorded(i, float(i), b) for i, b in enumerate(bodies)), state)


def launched(pod: str = "p0", gpu: str = "A") -> list[EventBody]:
    return [
        PodRequested(key=f"k-{pod}", pod_id=pod, gpu_type=gpu, provider="fake", reservation_id=f"res-{pod}"),
        PodCreated(pod_id=pod, provider_id=f"fp-{pod}", usd_per_hour=1.0),
        PodReady(key=f"k-{pod}", pod_id=pod, provider_id=f"fp-{pod}", url=f"fake://{pod}"),
    ]


def test_a_pod_runs_through_its_lifecycle() -> None:
    s = fold(
        [
            *launched(),
            JobAssigned(key="a1", job_id="j", pod_id="p0"),
            JobSucceeded(key="a1", job_id="j", pre=0, post=1, train_seconds=1),
            PodTerminating(key="t1", pod_id="p0", provider_id="fp-p0", reason="idle_ttl"),
            PodTerminated(key="t1", pod_id="p0", reason="idle_ttl"),
        ]
    )
    p = s.pods["p0"]
    assert (p.status, p.provider_id, p.url, p.jobs_done, p.reason) == ("gone", "fp-p0", "fake://p0", 1, "idle_ttl")
    assert (p.requested_ts, p.created_ts, p.ready_ts, p.idle_since, p.ended_ts) == (0.0, 1.0, 2.0, 4.0, 6.0)
    assert s.counts == {"gone": 1} and s.anomalies == 0 and s.requested == 1


def test_busy_and_idle_follow_the_jobs_attempt() -> None:
    s = fold([*launched(), JobAssigned(key="a1", job_id="j", pod_id="p0")])
    assert s.pods["p0"].status == "busy" and available_pods(s) == []
    stale = fold([JobSucceeded(key="other", job_id="j", pre=0, post=1, train_seconds=1)], s)
    assert stale.pods["p0"].status == "busy"  # an outcome of another attempt frees nothing
    s = fold([JobRequeued(key="a1", job_id="j", reason="x", attempt=1)], s)
    assert (s.pods["p0"].status, s.pods["p0"].jobs_done) == ("idle", 0)


def test_a_lost_pod_keeps_its_job_until_the_attempt_ends_and_is_never_available() -> None:
    s = fold([*launched(), JobAssigned(key="a1", job_id="j", pod_id="p0"), PodLost(pod_id="p0", reason="dead")])
    assert s.pods["p0"].status == "lost" and s.pods["p0"].job_id == "j"
    s = fold([JobRequeued(key="a1", job_id="j", reason="x", attempt=1), PodIdle(pod_id="p0")], s)
    assert s.pods["p0"].status == "lost" and s.pods["p0"].job_id == "" and available_pods(s) == []


def test_provision_failures_record_stock_outs_and_a_created_pod_stays_to_be_terminated() -> None:
    s = fold(
        [
            PodRequested(key="k0", pod_id="p0", gpu_type="A", provider="f"),
            PodProvisionFailed(key="k0", pod_id="p0", kind="stock_out", gpu_type="A"),
            PodRequested(key="k1", pod_id="p1", gpu_type="B", provider="f"),
            PodCreated(pod_id="p1", provider_id="fp-1"),
            PodProvisionFailed(key="k1", pod_id="p1", kind="bootstrap", provider_id="fp-1"),
        ]
    )
    assert s.stockouts == {"A": 1.0} and s.failures == {"stock_out": 1, "bootstrap": 1}
    assert (s.pods["p0"].status, s.pods["p1"].status) == ("gone", "lost")
    assert s.last_failure.startswith("bootstrap")


def test_an_orphan_is_terminated_and_a_gone_pod_can_be_reopened_for_that() -> None:
    s = fold([PodTerminating(key="t", pod_id="p9", provider_id="fp-x", reason="orphan")])
    assert (s.pods["p9"].status, s.pods["p9"].provider_id) == ("terminating", "fp-x")
    s = fold([PodTerminated(key="t", pod_id="p9"), PodTerminating(key="t2", pod_id="p9", provider_id="fp-y")], s)
    assert (s.pods["p9"].status, s.pods["p9"].provider_id) == ("terminating", "fp-y")


def test_gpu_time_bookkeeping_and_draining() -> None:
    s = fold(
        [
            *launched(),
            CostSettled(reservation_id="res-p0", kind="job", ref="pod:p0", usd=0.25),
            CostReserved(reservation_id="res-9", kind="job", ref="pod:p0", usd=1.0),
            CostReserved(reservation_id="res-x", kind="job", ref="episode-7", usd=1.0),  # not a pod's
            CostRefused(kind="job", ref="pod:p0", budget="run", requested_usd=1, remaining_usd=0, message="no"),
        ]
    )
    p = s.pods["p0"]
    assert (p.charged_usd, p.reservation_id, p.draining) == (0.25, "res-9", True)
    assert available_pods(s) == [] and s.budget_refusals == 1 and s.last_refusal == "no"
    assert by_gpu(s) == {"A": 1}


pods = st.sampled_from(["p0", "p1", "p2"])
jobs = st.sampled_from(["j0", "j1"])
keys = st.sampled_from(["a", "b", ""])
fleet_bodies = st.one_of(
    st.builds(lambda p: PodRequested(key=f"k{p}", pod_id=p, gpu_type="A", provider="f"), pods),
    st.builds(lambda p: PodCreated(pod_id=p, provider_id=f"fp-{p}"), pods),
    st.builds(lambda p: PodReady(key=f"k{p}", pod_id=p, provider_id=f"fp-{p}", url="u"), pods),
    st.builds(
        lambda p, k: PodProvisionFailed(key=f"k{p}", pod_id=p, kind=k), pods, st.sampled_from(["stock_out", "x"])
    ),
    st.builds(lambda p, ok: PodSelfChecked(pod_id=p, ok=ok, checks=[PodCheck(name="gpu", ok=ok)]), pods, st.booleans()),
    st.builds(lambda p: PodLost(pod_id=p, reason="r"), pods),
    st.builds(lambda p: PodIdle(pod_id=p), pods),
    st.builds(lambda p: PodTerminating(key="t", pod_id=p), pods),
    st.builds(lambda p: PodTerminated(key="t", pod_id=p), pods),
    st.builds(lambda j, p, k: JobAssigned(key=k, job_id=j, pod_id=p), jobs, pods, keys),
    st.builds(lambda j, k: JobSucceeded(key=k, job_id=j, pre=0, post=1, train_seconds=1), jobs, keys),
    st.builds(lambda j, k: JobFailed(key=k, job_id=j, reason="oom"), jobs, keys),
    st.builds(lambda j, k: JobRequeued(key=k, job_id=j, reason="x", attempt=1), jobs, keys),
)

ALLOWED = {
    ("requested", "provisioning"),
    ("requested", "ready"),
    ("provisioning", "ready"),
    ("ready", "busy"),
    ("ready", "idle"),
    ("idle", "busy"),
    ("busy", "idle"),
    *((s, "lost") for s in ("requested", "provisioning", "ready", "busy", "idle")),
    ("requested", "gone"),
    ("provisioning", "gone"),
    *((s, "terminating") for s in ("requested", "provisioning", "ready", "busy", "idle", "lost", "gone")),
    ("terminating", "gone"),
}


@settings(max_examples=300, deadline=None)
@given(st.lists(fleet_bodies, max_size=40), st.integers(0, 40))
def test_any_event_stream_keeps_the_fleet_consistent(events: list[EventBody], cut: int) -> None:
    state = F.initial()
    prev: dict[str, str] = {}
    for i, body in enumerate(events):
        state = F.apply(state, Recorded(i, float(i), body))
        for pod_id, pod in state.pods.items():
            if pod_id in prev and prev[pod_id] != pod.status:
                assert (prev[pod_id], pod.status) in ALLOWED, (prev[pod_id], pod.status)
            assert (pod.status == "busy") <= bool(pod.job_id)  # a busy pod always names its job
        prev = {p: pod.status for p, pod in state.pods.items()}
        assert state.counts == dict(Counter(p.status for p in state.pods.values()))
        holders = Counter(p.job_id for p in state.pods.values() if p.job_id and p.status in LIVE)
        assert all(n == 1 for n in holders.values())  # no job occupies two live pods
    recs = [Recorded(i, float(i), b) for i, b in enumerate(events)]
    restored = F.decode_state(F.encode_state(F.fold(recs[:cut])))
    assert F.encode_state(F.fold(recs[cut:], restored)) == F.encode_state(state)


def test_one_job_never_holds_two_pods() -> None:
    s = fold([*launched("p0"), *launched("p1"), JobAssigned(key="a", job_id="j", pod_id="p0")])
    s = fold([JobAssigned(key="b", job_id="j", pod_id="p1")], s)
    assert (s.pods["p0"].status, s.pods["p1"].status, s.anomalies) == ("busy", "ready", 1)


def test_an_outcome_naming_no_pod_or_another_frees_the_pod_that_holds_the_job() -> None:
    pods = [*launched("p0"), *launched("p1"), *launched("p2")]
    work = [JobAssigned(key="a0", job_id="j0", pod_id="p0"), JobAssigned(key="a1", job_id="j1", pod_id="p1")]
    for named in ("", "p2", "p0"):  # none, an idle pod, a pod busy with another job
        s = fold([*pods, *work, JobSucceeded(key="a1", job_id="j1", pod_id=named, pre=0, post=1, train_seconds=1)])
        assert [(p.status, p.job_id, p.jobs_done) for p in s.pods.values()] == [
            ("busy", "j0", 0),
            ("idle", "", 1),
            ("ready", "", 0),
        ], named


outcomes_naming_pods = st.one_of(
    st.builds(
        lambda j, k, p: JobSucceeded(key=k, job_id=j, pod_id=p, pre=0, post=1, train_seconds=1), jobs, keys, pods
    ),
    st.builds(lambda j, k, p: JobRequeued(key=k, job_id=j, reason="x", attempt=1, pod_id=p), jobs, keys, pods),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(fleet_bodies, outcomes_naming_pods), max_size=50))
def test_the_projections_count_of_each_jobs_pods_follows_the_state(events: list[EventBody]) -> None:
    # The projection keeps how many pods name each job outside the state; one that kept it across the whole stream
    # and a fresh one per event (which counts from the state each time) must fold every stream to the same state,
    # and the kept count must be the pods' own at every step.
    # The three pods come up first, so that most streams assign jobs and end their attempts.
    kept = FleetProjection()
    state, fresh_state = kept.initial(), kept.initial()
    for i, body in enumerate([*launched("p0"), *launched("p1"), *launched("p2"), *events]):
        rec = Recorded(i, float(i), body)
        state = kept.apply(state, rec)
        fresh_state = FleetProjection().apply(fresh_state, rec)
        assert kept.encode_state(state) == kept.encode_state(fresh_state), body
        named = Counter(p.job_id for p in state.pods.values() if p.job_id)
        assert {j: kept.holders(state, j) for j in ("j0", "j1", "j2", "")} == {
            j: named.get(j, 0) for j in ("j0", "j1", "j2", "")
        }
