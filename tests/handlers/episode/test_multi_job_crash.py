"""kill -9 with two jobs in flight, then resume: nothing lost, nothing duplicated.

A child process (``multi_job_child``) runs a multi-job episode that submits two jobs and waits for them while the
fake job runner holds both in training; the test SIGKILLs it once both jobs are queued and the wait has begun.
The resumed episode (``resume_point`` + ``EpisodeRunner.run(setup, point)``) adopts the two jobs (the fake
runner plays them again, as a reconnecting dispatcher would), re-runs the interrupted ``wait_for_jobs``, reads
the results and finishes with job-2: each job is submitted and queued once, ends once, and the episode gets
exactly one reward, computed from job-2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from adapters.agents.scripted import ScriptedPolicy
from engine.blobs import BlobStore
from engine.log import read_log
from engine.runtime import Runtime
from events import (
    EpisodeFinalChosen,
    EpisodeJobSubmitted,
    JobQueued,
    JobSucceeded,
    RewardComputed,
    SubmissionReceived,
    ToolCalled,
)
from handlers.episode.resume import episode_histories, resume_point
from handlers.episode.runner import EpisodeRunner
from handlers.reward.formula import RewardConfig
from handlers.reward.projection import RewardsProjection
from handlers.reward.reactor import RewardReactor
from tests.fakes import FakeValidator
from tests.fakes.jobs import FakeJobs
from tests.handlers.episode.multi_job_child import EP, OUTCOMES, projections, setup, trajectory

ROOT = Path(__file__).resolve().parents[3]


def _events(run: Path) -> list[object]:
    return [r.event for r in read_log(run / "events.jsonl").records]


def _both_in_flight(run: Path) -> bool:
    path = run / "events.jsonl"
    if not path.exists():
        return False
    text = path.read_text(errors="replace")
    return text.count('"job.started"') >= 2 and '"wait_for_jobs"' in text and text.count('"phase":"train"') >= 6


def _kill_with_two_jobs_in_flight(run: Path, ws: Path, err: Path) -> None:
    with err.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.handlers.episode.multi_job_child", str(run), str(ws)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + 120
            while not _both_in_flight(run):
                assert child.poll() is None, err.read_text()
                assert time.monotonic() < deadline, "the child never had both jobs in flight"
                time.sleep(0.1)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.slow
async def test_kill_9_with_two_jobs_in_flight_then_resume(tmp_path: Path) -> None:
    run, ws = tmp_path / "run", tmp_path / "ws"
    await anyio.to_thread.run_sync(_kill_with_two_jobs_in_flight, run, ws, tmp_path / "child.err")
    before = _events(run)
    assert [e.job_id for e in before if isinstance(e, JobQueued)] == [f"{EP}-job-1", f"{EP}-job-2"]
    assert not [e for e in before if isinstance(e, JobSucceeded | RewardComputed | EpisodeFinalChosen)]

    history = episode_histories(read_log(run / "events.jsonl").records, [EP])[EP]
    point = resume_point(history, BlobStore(run / "blobs"), max_attempts=3)
    assert point is not None and [c.name for c in point.pending] == ["wait_for_jobs"]
    async with Runtime(run, projections()) as rt:
        rt.start_reactor(RewardReactor(RewardConfig()))
        rt.start_reactor(FakeJobs(OUTCOMES, adopt=(f"{EP}-job-1", f"{EP}-job-2")))
        runner = EpisodeRunner(rt, BlobStore(run / "blobs"), ScriptedPolicy(trajectory()), FakeValidator())
        out = await runner.run(setup(ws), point)
        with anyio.fail_after(20):
            await rt.wait_until(lambda: EP in rt.state(RewardsProjection))
    assert (out.status, out.final_job) == ("finished", f"{EP}-job-2")
    after = _events(run)
    count = Counter(type(e).__name__ for e in after)
    assert count["EpisodeJobSubmitted"] == 2 and count["JobQueued"] == 2 and count["SubmissionReceived"] == 2
    assert Counter(e.job_id for e in after if isinstance(e, JobSucceeded)) == {f"{EP}-job-1": 1, f"{EP}-job-2": 1}
    assert [e.name for e in after if isinstance(e, ToolCalled)].count("wait_for_jobs") == 1  # re-run, not re-called
    (reward,) = [e for e in after if isinstance(e, RewardComputed)]
    assert (reward.job_id, reward.post, reward.train_seconds) == (f"{EP}-job-2", 0.45, 80.0)
    assert [e.job_id for e in after if isinstance(e, EpisodeJobSubmitted)] == [f"{EP}-job-1", f"{EP}-job-2"]
    assert len([e for e in after if isinstance(e, SubmissionReceived)]) == 2
