"""benchmarks/replica_timeline.py: a run's pod occupancy read from its log, on a hand-made run whose answer is known."""

from __future__ import annotations

from pathlib import Path

from benchmarks.replica_timeline import timeline
from events import (
    BatchCollected,
    BatchStarted,
    EventBody,
    JobAssigned,
    JobQueued,
    JobSucceeded,
    Recorded,
    RunFinished,
    RunStarted,
)
from events.codec import encode_record


def _job(job: str, queued: float, assigned: float, done: float) -> list[tuple[float, EventBody]]:
    return [
        (queued, JobQueued(job_id=job, episode_id=job, family="f", base_model="m", bundle="b")),
        (assigned, JobAssigned(key=f"{job}:1", job_id=job, pod_id="p0", attempt=1)),
        (done, JobSucceeded(key=f"{job}:1", job_id=job, pre=0.0, post=0.1, train_seconds=1.0)),
    ]


def test_the_timeline_of_a_two_job_step(tmp_path: Path) -> None:
    # One step from t=10 to t=60: job a runs 15..45, job b 20..50 (together 20..45), then the learner.
    timed: list[tuple[float, EventBody]] = [
        (0.0, RunStarted(run_id="r", seed=0, code_version="x")),
        (10.0, BatchStarted(step=0, task_ids=["t"], group_size=2)),
        *_job("a", 14.0, 15.0, 45.0),
        *_job("b", 14.5, 20.0, 50.0),
        (55.0, BatchCollected(step=0, episode_ids=["a", "b"])),
        (70.0, RunFinished(status="ok")),
    ]
    timed.sort(key=lambda pair: pair[0])
    lines = [encode_record(Recorded(i, 1000.0 + t, body)) for i, (t, body) in enumerate(timed)]
    (tmp_path / "events.jsonl").write_bytes(b"".join(lines))
    t = timeline(tmp_path)
    assert t.wall == 70.0
    assert t.job_seconds == 60.0  # 30 + 30
    assert t.running == {0: 35.0, 1: 10.0, 2: 25.0}  # idle 0..15 and 50..70; one job 15..20 and 45..50
    assert t.waits == [1.0, 5.5]
    [step] = t.steps
    assert (step.first_start, step.alone) == (5.0, 5.0)  # a started 5 s in; b ran alone 45..50
