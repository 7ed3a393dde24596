"""The spine's golden log replays to a known state hash, through read_log + fold and through a Runtime.

fixtures/golden/spine/events.jsonl was written by ``python -m tests.engine.make_golden`` (see there). If this
test fails, either the line format, an event schema, the projection below or the hashing changed: an old
log must keep replaying, so fix the code (or add an upcaster) rather than the fixture. Only when the format
changes on purpose: regenerate the log, run this test, and paste the new hash into GOLDEN_HASH.

The hash covers the test projection below, which reads named fields only, so adding an optional field to
an event (which changes how today's code re-encodes a body) does not move it; the side-effect bookkeeping
is checked by what it holds (which pod request is still pending), not by its encoding.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from engine.effects import EffectsProjection
from engine.log import read_log
from engine.projection import Projection, handles, state_hash
from engine.runtime import Runtime
from events import (
    CostReserved,
    CostSettled,
    JobAssigned,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    PodIdle,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodTerminated,
    Recorded,
    RunFinished,
    RunStarted,
)

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "spine" / "events.jsonl"
GOLDEN_HASH = "d4120d63b13299399733a84c5c58c577059cbb26ea3cb9e4c725b082b3617ebc"  # see the module docstring


class RunSummary(msgspec.Struct):
    status: str = ""
    seed: int = 0
    jobs: dict[str, str] = {}
    attempts: dict[str, int] = {}
    steps: dict[str, int] = {}
    pods: dict[str, str] = {}
    reserved_usd: float = 0.0
    settled_usd: float = 0.0
    last_ts: float = 0.0


class SummaryProjection(Projection[RunSummary]):
    """A test-only projection over the run/job/pod/cost events (the domain projections live in handlers/)."""

    name = "summary"
    state_type = RunSummary

    def initial(self) -> RunSummary:
        return RunSummary()

    def apply(self, state: RunSummary, rec: Recorded) -> RunSummary:
        state = super().apply(state, rec)
        state.last_ts = rec.ts  # every event, handled or not
        return state

    @handles(RunStarted)
    def started(self, s: RunSummary, e: RunStarted) -> RunSummary:
        s.status, s.seed = "running", e.seed
        return s

    @handles(RunFinished)
    def finished(self, s: RunSummary, e: RunFinished) -> RunSummary:
        s.status = e.status
        return s

    @handles(JobQueued, JobRequeued)
    def queued(self, s: RunSummary, e: JobQueued | JobRequeued) -> RunSummary:
        s.jobs[e.job_id] = "queued"
        return s

    @handles(JobAssigned)
    def assigned(self, s: RunSummary, e: JobAssigned) -> RunSummary:
        s.jobs[e.job_id] = f"assigned:{e.pod_id}"
        s.attempts[e.job_id] = e.attempt
        return s

    @handles(JobStarted)
    def job_started(self, s: RunSummary, e: JobStarted) -> RunSummary:
        s.jobs[e.job_id] = "running"
        return s

    @handles(JobProgressed)
    def progressed(self, s: RunSummary, e: JobProgressed) -> RunSummary:
        s.steps[e.job_id] = e.step
        return s

    @handles(JobSucceeded)
    def succeeded(self, s: RunSummary, e: JobSucceeded) -> RunSummary:
        s.jobs[e.job_id] = f"succeeded:{e.post - e.pre:.2f}"
        return s

    @handles(JobFailed)
    def failed(self, s: RunSummary, e: JobFailed) -> RunSummary:
        s.jobs[e.job_id] = f"failed:{e.reason}"
        return s

    @handles(PodRequested)
    def pod_requested(self, s: RunSummary, e: PodRequested) -> RunSummary:
        s.pods[e.pod_id] = "requested"
        return s

    @handles(PodReady, PodIdle, PodTerminated, PodProvisionFailed)
    def pod_changed(self, s: RunSummary, e: PodReady | PodIdle | PodTerminated | PodProvisionFailed) -> RunSummary:
        s.pods[e.pod_id] = e.type.removeprefix("pod.")
        return s

    @handles(CostReserved)
    def reserved(self, s: RunSummary, e: CostReserved) -> RunSummary:
        s.reserved_usd += e.usd
        return s

    @handles(CostSettled)
    def settled(self, s: RunSummary, e: CostSettled) -> RunSummary:
        s.settled_usd += e.usd
        return s


def test_golden_log_replays_to_the_recorded_hash() -> None:
    recovery = read_log(GOLDEN)
    assert recovery.torn_bytes == 0 and len(recovery.records) == 29
    projs = [SummaryProjection(), EffectsProjection()]
    states = {p.name: p.fold(recovery.records) for p in projs}
    assert state_hash(projs[:1], states) == GOLDEN_HASH
    # What the hash stands for, spelled out, so that a failure says what moved.
    assert states["summary"] == RunSummary(
        status="ok",
        seed=1234,
        jobs={"job-a": "succeeded:0.35", "job-b": "succeeded:0.20"},
        attempts={"job-a": 1, "job-b": 2},
        steps={"job-a": 2},
        pods={"pod-1": "terminated", "pod-2": "provision_failed", "pod-3": "requested"},
        reserved_usd=0.75 + 0.75 + 0.75,
        settled_usd=0.62 + 0.125 + 0.5,
        last_ts=1_764_460_800.0 + 28 * 0.5,
    )
    pending_pods = [(k, p.seq) for k, p in states["effects"].items() if p.type == "pod.requested"]
    assert pending_pods == [("golden-spine:26", 26)]  # pod-1 got ready, pod-2 failed, pod-3 never answered


def test_golden_log_resumes_in_a_runtime_with_the_same_hash(tmp_path: Path) -> None:
    shutil.copyfile(GOLDEN, tmp_path / "events.jsonl")
    summary = SummaryProjection()
    rt = Runtime(tmp_path, [summary], run_id="golden-spine")
    try:
        assert state_hash([summary], rt.states) == GOLDEN_HASH
        pending = [r for r in rt.pending_requests() if isinstance(r.event, PodRequested)]
        assert [(r.seq, r.event.key, r.event.pod_id, r.event.gpu_type) for r in pending] == [
            (26, "golden-spine:26", "pod-3", "A100")
        ]
    finally:
        rt.log.close()
    assert (tmp_path / "events.jsonl").read_bytes() == GOLDEN.read_bytes()  # opening changed nothing
