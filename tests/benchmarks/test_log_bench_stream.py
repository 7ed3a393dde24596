"""log_bench's two replay streams: the issue's folds each job's start and progress as queue anomalies (no job is
ever assigned), the lifecycle stream folds none."""

from __future__ import annotations

from pathlib import Path

from benchmarks.log_bench import body, lifecycle_body, write_replay_file
from engine.replay import replay
from handlers.registry import default_projections


def test_the_lifecycle_stream_takes_no_anomaly_branch_and_the_issues_stream_does(tmp_path: Path) -> None:
    states = {}
    for name, stream in (("bench", body), ("lifecycle", lifecycle_body)):
        write_replay_file(tmp_path / f"{name}.jsonl", 800, stream)
        states[name] = replay(tmp_path / f"{name}.jsonl", default_projections()).states["queue"]
    # 100 jobs, all succeeded in both; the issue's stream: a start and four progress events per job out of order
    assert states["bench"].counts == {"succeeded": 100} and states["bench"].anomalies == 500
    assert states["lifecycle"].counts == {"succeeded": 100} and states["lifecycle"].anomalies == 0
    assert all(j.attempts == 1 and j.step == 4 for j in states["lifecycle"].jobs.values())
