"""The report of an ``ait episode`` run: its reward term by term, its job's curve and scores with n, how far
training got, and none of the per-step plots (which would be blank axes for a run without outer steps)."""

from __future__ import annotations

from pathlib import Path

import anyio

from engine.clock import ManualClock
from engine.runtime import Runtime
from events import (
    EpisodeFinished,
    EpisodeStarted,
    JobProgressed,
    JobQueued,
    JobStarted,
    JobStoppedEarly,
    JobSucceeded,
    RunFinished,
    RunStarted,
    SubmissionReceived,
    SubmissionValidated,
)
from handlers.registry import default_projections
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward
from views.report import write_report


def _write(run: Path, *, stopped: bool) -> None:
    async def go() -> None:
        async with Runtime(run, default_projections(), clock=ManualClock()) as rt:
            await rt.emit(RunStarted(run_id=run.name, seed=0, code_version="t", config={"command": "episode"}))
            await rt.emit(EpisodeStarted(episode_id="ep-0", task_id="t/0", family="calc_chain", policy="scripted"))
            await rt.emit(SubmissionReceived(episode_id="ep-0", attempt=1))
            await rt.emit(SubmissionValidated(episode_id="ep-0", attempt=1, checks=[], probe_seconds=3.0))
            await rt.emit(EpisodeFinished(episode_id="ep-0", status="validated"))
            await rt.emit(JobQueued(job_id="job-0", episode_id="ep-0", family="calc_chain", base_model="M", bundle="b"))
            await rt.emit(JobStarted(job_id="job-0", pod_id="local-1"))
            await rt.emit(JobProgressed(job_id="job-0", step=0, phase="pre_score", reward=0.27))
            for step, reward in ((1, 0.30), (2, 0.35), (3, 0.41)):
                await rt.emit(
                    JobProgressed(job_id="job-0", step=step, total_steps=10, phase="train", reward=reward, loss=0.1)
                )
            if stopped:
                await rt.emit(JobStoppedEarly(job_id="job-0", steps_done=3, steps_total=10, reason="deadline"))
            await rt.emit(
                JobSucceeded(job_id="job-0", pre=0.27, post=0.33, train_seconds=60.0, metrics={"eval_n": 200.0})
            )
            inputs = RewardInputs(
                episode_id="ep-0",
                parseable=True,
                attempts=1,
                validated=True,
                job_status="succeeded",
                post=0.33,
                best_pre=0.27,
                train_seconds=60.0,
                time_budget_s=600.0,
                family="calc_chain",
                job_id="job-0",
                base_model="M",
            )
            await rt.emit(compute_reward(inputs, RewardConfig()))
            await rt.emit(RunFinished(status="ok", reason="episode rewarded"))

    anyio.run(go)


def test_an_episode_run_reports_its_reward_its_curve_and_that_it_was_cut_short(tmp_path: Path) -> None:
    from views.report.plots import PLOTS

    run = tmp_path / "runs" / "ep-1"
    _write(run, stopped=True)
    files = write_report(run, tmp_path / "out")
    assert [p.name for p in files.plots] == ["job_curves.png"]
    assert not any((tmp_path / "out" / name).exists() for name in PLOTS)
    md = files.markdown.read_text()
    assert "| status | finished:ok |" in md
    assert "No training job was scored yet" not in md and "## Reward per outer step" not in md
    assert "| validation | 1.000 | 0.35 | 0.350 |" in md
    assert "uplift +0.060" in md and "each on 200 hidden tasks" in md
    assert "**Training was cut short: stopped at step 3 of 10: deadline.**" in md
    assert "| 3 | 0.410 | 0.1000 |" in md
    assert "| step | agent tokens |" not in md  # no per-step cost table without outer steps
    assert "![inner job training curves](job_curves.png)" in md
    assert files.plots[0].stat().st_size > 20_000


def test_a_job_that_ran_every_step_is_not_called_cut_short(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "ep-2"
    _write(run, stopped=False)
    md = write_report(run, tmp_path / "out").markdown.read_text()
    assert "Training curve (3 step(s) of 10)" in md and "cut short" not in md
