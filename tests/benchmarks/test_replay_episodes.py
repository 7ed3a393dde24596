"""benchmarks/replay_episodes.py writes the log it says: every job behind its own episode, replayable."""

from __future__ import annotations

from pathlib import Path

from benchmarks.replay_episodes import JOB_EVENTS, write_run_log
from engine.replay import replay
from handlers.registry import default_projections


def test_the_run_shaped_log_puts_every_job_in_its_episode(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    assert write_run_log(path, 5) == 5 * (1 + JOB_EVENTS)
    result = replay(path, default_projections())
    assert result.count == 45 and result.by_type["episode.started"] == 5 and result.by_type["job.progressed"] == 20
    assert sorted(result.states["episodes"]) == [f"ep-{j:07d}" for j in range(5)]  # the projection holds them
    jobs = result.states["queue"].jobs
    assert {j.episode_id for j in jobs.values()} == set(result.states["episodes"])  # each job names its episode
