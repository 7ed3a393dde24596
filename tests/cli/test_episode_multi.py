"""`ait episode` on a multi-job spec, keyless, on the real CPU path: the scripted two-job trajectory runs job-1
at lr 1e-4 (too high), reads its result, runs job-2 at the fixture's 1e-5 and names it final. Both jobs really
train on the local pod's CPU trainer and are scored on the hidden eval; the second scores better; the reward is
job-2's."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import main
from engine.replay import replay
from handlers.registry import default_projections

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)  # two CPU jobs (each: hidden and dev scores before and after, 2 training steps)
def test_two_jobs_the_second_scores_better_and_is_rewarded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Shrunk like the one-job CPU test: the first 16 hidden tasks on both sides, 3 steps of 16 rollouts per job
    # (2 steps leave too little of the first job's damage to see on 16 tasks). The episode freezes the baseline
    # it rewards against on the same 16 tasks at first use (a separate `ait baselines --limit 16` is a smoke run
    # the reward never reads).
    task = REPO / "examples" / "tasks" / "multi" / "calc_chain_v1_fast_multi.json"
    agent = "scripted:" + str(REPO / "fixtures" / "trajectories" / "calc_chain_two_jobs.json")
    smoke = ["eval_limit=16", "max_steps=3", "batch_size=16"]
    argv = ["--runs-root", str(tmp_path), "episode", "--task", str(task), "--run-id", "m", "--agent", agent]
    code = main(argv + [arg for opt in smoke for arg in ("--trainer-opt", opt)])
    out = capsys.readouterr().out
    assert code == 0, out
    result = replay(tmp_path / "m" / "events.jsonl", default_projections())
    assert result.by_type["episode.job_submitted"] == 2 and result.by_type["job.succeeded"] == 2
    # One local pod served both jobs (it stayed up while the agent read job-1's result and wrote job-2), and it
    # was terminated when the episode ended.
    assert result.by_type["pod.requested"] == 1 and result.by_type["pod.terminated"] == 1
    ep = result.states["episodes"]["ep-0"]
    one, two = ep.jobs["ep-0-job-1"], ep.jobs["ep-0-job-2"]
    assert ep.final_job == two.job_id and two.parent_job_id == one.job_id
    assert one.post is not None and two.post is not None and two.post > one.post, (one.post, two.post)
    assert one.dev_post is not None and two.dev_post is not None  # what the agent read
    (computed,) = result.states["rewards"].values()
    assert (computed.job_id, computed.post, computed.outcome) == (two.job_id, two.post, "scored")
    assert computed.train_seconds == pytest.approx(one.train_seconds + two.train_seconds)
    assert computed.best_pre == max(result.states["baselines"]["calc_chain"].values())
    assert "job-2 (final) (ep-0-job-2)" in out and f"reward {computed.reward:+.4f}" in out, out
