"""The outer loop's episodes (cli/outer_episodes.py): an episode dropped for good has its jobs cancelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.outer_episodes import OuterEpisodes
from cli.train_config import load_run_config
from engine.log import read_log
from engine.runtime import Runtime
from events import JobCancelRequested, JobQueued, JobSucceeded
from handlers.fleet.queue import QueueProjection

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"


def queued(job_id: str, episode_id: str) -> JobQueued:
    return JobQueued(job_id=job_id, episode_id=episode_id, family="calc_chain", base_model="m", bundle="b")


async def _no_policy(*_: Any) -> Any:
    raise AssertionError("no episode runs here")


async def test_dropping_episodes_requests_a_cancel_for_each_of_their_unfinished_jobs_once(tmp_path: Path) -> None:
    async with Runtime(tmp_path / "run", [QueueProjection()], durability="none") as rt:
        for job_id, episode_id in [("job-e1", "e1"), ("e2-job-1", "e2"), ("e2-job-2", "e2"), ("job-e3", "e3")]:
            await rt.emit(queued(job_id, episode_id))
        await rt.emit(JobSucceeded(job_id="e2-job-1", pre=0.1, post=0.2, train_seconds=1.0))
        cfg = load_run_config(SMOKE)
        episodes = OuterEpisodes(rt, cfg, policy_for=_no_policy, validator=None, gate=None)  # type: ignore[arg-type]
        await episodes.drop_jobs(["e1", "e2"], "straggler of group g000001, closed short at step 3")
        await episodes.drop_jobs(["e2"], "asked again")  # a resumed loop asks again: nothing new
        cancels = rt.state(QueueProjection).cancels
    asked = [r.event for r in read_log(tmp_path / "run" / "events.jsonl").records]
    assert [e.job_id for e in asked if isinstance(e, JobCancelRequested)] == ["e2-job-2", "job-e1"]  # once each
    assert cancels == {
        "job-e1": "straggler of group g000001, closed short at step 3",
        "e2-job-2": "straggler of group g000001, closed short at step 3",
    }  # not the finished job, not another episode's
