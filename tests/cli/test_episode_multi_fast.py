"""`ait episode`'s multi-job composition with fakes at the ports (fast): the scripted two-job trajectory, the fake
validator, and a job runner that, like the local worker, gives every queued job of the run an outcome. The jobs
run while the agent works (its wait_for_jobs returns), the command prints each job and the final job's reward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from adapters.agents.scripted import ScriptedPolicy, load_trajectory
from cli.episode_cmd import run_episode
from cli.episode_wiring import EpisodeDeps
from cli.options import EpisodeOptions
from engine.replay import replay
from events import BaselineFrozen, JobProgressed, JobSucceeded
from handlers.episode.projection import EpisodesProjection
from handlers.registry import default_projections
from tests.fakes import FakeValidator

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "examples" / "tasks" / "multi" / "calc_chain_v1_fast_multi.json"
SCORES = {"ep-0-job-1": (0.25, 0.0625, 0.2, 0.1), "ep-0-job-2": (0.25, 0.3125, 0.2, 0.35)}


async def _drain(rt: Any, _job_id: str) -> None:
    """Every job of the episode without an outcome gets one (a worker draining the queue)."""
    for job in list(rt.state(EpisodesProjection)["ep-0"].jobs.values()):
        if job.status not in ("succeeded", "failed"):
            pre, post, dev_pre, dev_post = SCORES[job.job_id]
            await rt.emit(JobProgressed(job_id=job.job_id, step=1, phase="train", reward=0.5, loss=0.1))
            await rt.emit(
                JobSucceeded(
                    job_id=job.job_id,
                    pre=pre,
                    post=post,
                    train_seconds=30.0,
                    metrics={"dev_pre": dev_pre, "dev_post": dev_post},
                )
            )


async def test_multi_job_episode_command_prints_every_job_and_the_final_reward(tmp_path: Path) -> None:
    deps = EpisodeDeps(
        policy=ScriptedPolicy(load_trajectory(REPO / "fixtures" / "trajectories" / "calc_chain_two_jobs.json")),
        validator=FakeValidator(),
        job_runner=_drain,
        baselines=[BaselineFrozen(family="calc_chain", model="Qwen/Qwen3-0.6B", score=0.25, n=16)],
        ran_on={"jobs": "fake drain"},
    )
    opts = EpisodeOptions(task=str(TASK), runs_root=str(tmp_path), run_id="m")
    console = Console(record=True, width=200)
    assert await run_episode(opts, deps, tmp_path / "m", console) == 0
    out = console.export_text()
    assert "episode finished after" in out
    assert "job-1 (ep-0-job-1): succeeded; hidden pre 0.250 post 0.062; dev pre 0.200 post 0.100" in out
    assert "job-2 (final) (ep-0-job-2) after job-1: succeeded; hidden pre 0.250 post 0.312" in out
    result = replay(tmp_path / "m" / "events.jsonl", default_projections())
    (computed,) = result.states["rewards"].values()
    assert (computed.job_id, computed.post, computed.train_seconds) == ("ep-0-job-2", 0.3125, 60.0)
    assert f"reward {computed.reward:+.4f}" in out


def test_the_default_scripted_agent_of_a_multi_job_spec_is_the_two_job_trajectory() -> None:
    from cli.episode_wiring import make_policy

    assert make_policy("scripted", "calc_chain", None, multi=True)[1] == "scripted (calc_chain_two_jobs.json)"
    assert make_policy("scripted", "calc_chain", None)[1] == "scripted (calc_chain_good.json)"
    assert make_policy("scripted", "ledger", None, multi=True)[1] == "scripted (ledger_good.json)"  # none: one job
