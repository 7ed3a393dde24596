"""The queue projection: lifecycle, stale outcomes, FIFO order, and properties over random event streams."""

from __future__ import annotations

from collections import Counter

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events import (
    EventBody,
    JobAssigned,
    JobCancelRequested,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    Recorded,
)
from handlers.fleet.queue import FINAL, QueueProjection, QueueState, active_jobs, duration_estimate, waiting_jobs

Q = QueueProjection()


def queued(job: str) -> JobQueued:
    return JobQueued(job_id=job, episode_id="e", family="f", base_model="m", bundle="b")


def fold(bodies: list[EventBody]) -> QueueState:
    return Q.fold(Recorded(i, float(i), b) for i, b in enumerate(bodies))


def test_a_job_runs_through_its_lifecycle() -> None:
    s = fold(
        [
            queued("j"),
            JobAssigned(key="r:1", job_id="j", pod_id="p0", attempt=1),
            JobStarted(job_id="j", pod_id="p0"),
            JobProgressed(job_id="j", step=3, cursor=7),
            JobSucceeded(key="r:1", job_id="j", pre=0.1, post=0.5, train_seconds=2.0, result_blob="h"),
        ]
    )
    j = s.jobs["j"]
    assert (j.status, j.attempts, j.step, j.post, j.result_blob) == ("succeeded", 1, 3, 0.5, "h")
    assert (j.pod_id, j.key) == ("", "")
    assert (j.queued_ts, j.started_ts, j.finished_ts) == (0.0, 2.0, 4.0)
    assert s.counts == {"succeeded": 1} and s.anomalies == 0


def test_a_requeued_job_waits_again_and_a_stale_outcome_changes_nothing() -> None:
    s = fold(
        [
            queued("j"),
            JobAssigned(key="r:1", job_id="j", pod_id="p0", attempt=1),
            JobRequeued(key="r:1", job_id="j", reason="pod_lost", attempt=1),
            JobSucceeded(key="r:1", job_id="j", pre=0.0, post=1.0, train_seconds=1.0),  # the dead attempt, late
        ]
    )
    j = s.jobs["j"]
    assert (j.status, j.requeues, j.reason) == ("requeued", 1, "pod_lost")
    assert [w.job_id for w in waiting_jobs(s)] == ["j"] and s.anomalies == 1
    s = Q.apply(s, Recorded(9, 9.0, JobAssigned(key="r:9", job_id="j", pod_id="p1", attempt=2)))
    assert [a.job_id for a in active_jobs(s)] == ["j"] and s.jobs["j"].cursor == 0


def _timed(job: str, family: str, model: str, start: float, end: float, *, ok: bool = True) -> list[Recorded]:
    outcome: EventBody = (
        JobSucceeded(key=f"{job}:1", job_id=job, pre=0.0, post=0.1, train_seconds=1.0)
        if ok
        else JobFailed(key=f"{job}:1", job_id=job, reason="trainer_crash")
    )
    return [
        Recorded(0, start - 1, JobQueued(job_id=job, episode_id="e", family=family, base_model=model, bundle="b")),
        Recorded(0, start, JobAssigned(key=f"{job}:1", job_id=job, pod_id="p0", attempt=1)),
        Recorded(0, start, JobStarted(job_id=job, pod_id="p0")),
        Recorded(0, end, outcome),
    ]


def test_the_duration_estimate_is_the_median_wall_of_the_same_family_and_model() -> None:
    events = [
        *_timed("a", "ledger", "big", 10.0, 58.0),  # 48 s
        *_timed("b", "ledger", "big", 100.0, 150.0),  # 50 s
        *_timed("c", "ledger", "big", 200.0, 400.0),  # 200 s: an outlier the median shrugs off
        *_timed("d", "ledger", "small", 1.0, 21.0),  # another model
        *_timed("e", "calc", "big", 1.0, 27.0),  # another family
        *_timed("f", "ledger", "big", 1.0, 900.0, ok=False),  # failed: not a duration of the work
    ]
    s = Q.fold(Recorded(i, r.ts, r.event) for i, r in enumerate(events))
    assert s.anomalies == 0
    assert duration_estimate(s, "ledger", "big") == 50.0
    assert duration_estimate(s, "ledger", "small") == 20.0
    assert duration_estimate(s, "calc", "big") == 26.0
    assert duration_estimate(s, "calc", "small") == 0.0  # never finished here: unknown
    running = Q.fold(Recorded(i, r.ts, r.event) for i, r in enumerate(_timed("g", "x", "m", 5.0, 9.0)[:3]))
    assert duration_estimate(running, "x", "m") == 0.0  # still running: no duration yet


def test_final_states_are_final() -> None:
    s = fold(
        [
            queued("j"),
            JobFailed(job_id="j", reason="bundle_unreadable"),
            JobAssigned(key="r:2", job_id="j", pod_id="p0"),
            JobSucceeded(job_id="j", pre=0.0, post=1.0, train_seconds=1.0),
            queued("j"),
        ]
    )
    assert s.jobs["j"].status == "failed" and s.anomalies == 3


def test_waiting_jobs_are_served_in_queue_order_across_requeues() -> None:
    s = fold(
        [
            queued("b"),
            queued("a"),
            JobAssigned(key="k", job_id="b", pod_id="p"),
            JobRequeued(key="k", job_id="b", reason="x", attempt=1),
            queued("c"),
        ]
    )
    assert [j.job_id for j in waiting_jobs(s)] == ["b", "a", "c"]


def test_a_cancel_request_is_kept_until_the_jobs_outcome_and_ignored_on_a_final_job() -> None:
    s = fold(
        [
            queued("a"),
            queued("b"),
            queued("c"),
            JobAssigned(key="r:3", job_id="b", pod_id="p0", attempt=1),
            JobSucceeded(key="", job_id="c", pre=0.0, post=1.0, train_seconds=1.0),
            JobCancelRequested(job_id="a", reason="dropped"),
            JobCancelRequested(job_id="b", reason="dropped"),
            JobCancelRequested(job_id="c", reason="dropped"),  # finished first: nothing to stop
            JobCancelRequested(job_id="b", reason="again"),  # the first reason stands
        ]
    )
    assert s.cancels == {"a": "dropped", "b": "dropped"} and s.anomalies == 0
    assert s.jobs["a"].status == "queued" and s.jobs["b"].status == "assigned"  # a request moves no job
    s = Q.fold(
        [
            Recorded(20, 20.0, JobRequeued(key="r:3", job_id="b", reason="pod_lost", attempt=1)),
            Recorded(21, 21.0, JobFailed(key="", job_id="a", reason="cancelled", detail="dropped")),
        ],
        s,
    )
    assert s.cancels == {"b": "dropped"}  # a requeued job is still to cancel; a failed one is done
    s = Q.fold([Recorded(22, 22.0, JobFailed(key="", job_id="b", reason="cancelled"))], s)
    assert s.cancels == {} and s.counts == {"failed": 2, "succeeded": 1}
    unknown = fold([JobCancelRequested(job_id="nope", reason="x")])
    assert unknown.cancels == {} and unknown.anomalies == 1


jobs = st.sampled_from(["j0", "j1", "j2"])
pods = st.sampled_from(["p0", "p1"])
keys = st.sampled_from(["k0", "k1", "k2", ""])
bodies = st.one_of(
    st.builds(queued, jobs),
    st.builds(
        lambda j, p, k, a: JobAssigned(key=k, job_id=j, pod_id=p, attempt=a), jobs, pods, keys, st.integers(1, 4)
    ),
    st.builds(lambda j, p: JobStarted(job_id=j, pod_id=p), jobs, pods),
    st.builds(lambda j, c: JobProgressed(job_id=j, step=c, cursor=c), jobs, st.integers(0, 9)),
    st.builds(lambda j, k: JobSucceeded(key=k, job_id=j, pre=0.0, post=1.0, train_seconds=1.0), jobs, keys),
    st.builds(lambda j, k: JobFailed(key=k, job_id=j, reason="oom"), jobs, keys),
    st.builds(lambda j, k: JobRequeued(key=k, job_id=j, reason="lost", attempt=1), jobs, keys),
    st.builds(lambda j: JobCancelRequested(job_id=j, reason="dropped"), jobs),
)

ALLOWED = {
    ("queued", "assigned"),
    ("requeued", "assigned"),
    ("assigned", "running"),
    *((a, b) for a in ("queued", "requeued", "assigned", "running") for b in ("succeeded", "failed")),
    ("assigned", "requeued"),
    ("running", "requeued"),
}


@settings(max_examples=300, deadline=None)
@given(st.lists(bodies, max_size=40), st.integers(0, 40), st.booleans())
def test_any_event_stream_keeps_the_queue_consistent(events: list[EventBody], cut: int, queued_first: bool) -> None:
    if queued_first:  # every job exists from the start: short random streams then reach deep into the lifecycle
        events = [queued("j0"), queued("j1"), queued("j2"), *events]
    state, prev = Q.initial(), {}
    for i, body in enumerate(events):
        state = Q.apply(state, Recorded(i, float(i), body))
        for job_id, job in state.jobs.items():
            before = prev.get(job_id)
            if before is not None and before[0] != job.status:
                assert (before[0], job.status) in ALLOWED, (before[0], job.status)
                assert before[0] not in FINAL
            if before is not None:
                assert job.attempts >= before[1]
                if job.status == "assigned" and before[0] != "assigned":
                    assert job.attempts > before[1]  # every assignment is a new attempt
        prev = {j: (job.status, job.attempts) for j, job in state.jobs.items()}
        assert state.counts == dict(Counter(j.status for j in state.jobs.values()))
        for job in state.jobs.values():  # an open attempt names its pod; a job without one holds no pod or key
            is_open = job.status in ("assigned", "running")
            assert bool(job.pod_id) == is_open and (is_open or job.key == "")
        # a cancel waits on a job that exists and is not final, and ends with the job
        assert all(j in state.jobs and state.jobs[j].status not in FINAL for j in state.cancels)
    # Snapshot round trip: folding on from a decoded snapshot gives the same state as folding straight through.
    recs = [Recorded(i, float(i), b) for i, b in enumerate(events)]
    head = Q.fold(recs[:cut])
    restored = Q.decode_state(Q.encode_state(head))
    assert Q.encode_state(Q.fold(recs[cut:], restored)) == Q.encode_state(state)
    assert msgspec.json.decode(Q.encode_state(state), type=QueueState) == state
