"""log_bench's two replay streams: the issue's folds each job's start and progress as queue anomalies (no job is
ever assigned), the lifecycle stream folds none: its pods come up, each job runs on one and frees it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from benchmarks.log_bench import (
    LIFECYCLE_PODS,
    LIFECYCLE_SETUP,
    body,
    lifecycle_body,
    parse_only,
    write_replay_file,
)
from engine.replay import replay
from handlers.registry import default_projections


def test_the_lifecycle_stream_takes_no_anomaly_branch_and_the_issues_stream_does(tmp_path: Path) -> None:
    results = {}
    for name, stream, n in (("bench", body, 800), ("lifecycle", lifecycle_body, LIFECYCLE_SETUP + 800)):
        write_replay_file(tmp_path / f"{name}.jsonl", n, stream)
        results[name] = replay(tmp_path / f"{name}.jsonl", default_projections())
    bench, lifecycle = results["bench"].states["queue"], results["lifecycle"].states["queue"]
    # 100 jobs, all succeeded in both; the issue's stream: a start and four progress events per job out of order
    assert bench.counts == {"succeeded": 100} and bench.anomalies == 500
    assert lifecycle.counts == {"succeeded": 100} and lifecycle.anomalies == 0
    assert all(j.attempts == 1 and j.step == 4 for j in lifecycle.jobs.values())
    # Every pod came up and took jobs in turn; each attempt's outcome freed its pod and closed its effect.
    fleet = results["lifecycle"].states["fleet"]
    assert fleet.anomalies == 0 and fleet.counts == {"idle": LIFECYCLE_PODS}
    assert sum(p.jobs_done for p in fleet.pods.values()) == 100
    assert results["lifecycle"].states["effects"] == {}
    # ... which they were, while the first job ran on its pod.
    running = replay(tmp_path / "lifecycle.jsonl", default_projections(), until=LIFECYCLE_SETUP + 2)
    assert [e.type for e in running.states["effects"].values()] == ["job.assigned"]


def test_the_parse_alone_bound_parses_every_line_and_refuses_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_replay_file(path, 3_000)
    data = path.read_bytes()
    # A line longer than a 64 KiB block (its own block) between the others, so block edges are crossed both ways.
    long_line = b'{"seq":3000,"pad":"' + b"x" * 70_000 + b'"}\n'
    path.write_bytes(data + long_line + data[: data.index(b"\n") + 1])
    assert parse_only(path) == 3_002
    # It parses each line, not just its seq: JSON broken after the seq is refused.
    broken = data.replace(b'"ts":', b'"ts":}', 1)
    path.write_bytes(broken)
    with pytest.raises(msgspec.DecodeError):
        parse_only(path)
