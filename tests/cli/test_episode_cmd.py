"""`ait episode` on the embedded defaults: the scripted agent, the real sandboxed probe, a validated job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main
from engine.replay import replay
from handlers.registry import default_projections

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_episode_reaches_a_validated_queued_job_and_says_why_it_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = REPO / "examples" / "tasks" / "string_pipeline_v1_fast.json"
    code = main(["--runs-root", str(tmp_path), "episode", "--task", str(task), "--run-id", "r1", "--no-job"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "episode validated after" in out and "job job-0 queued; stopping after validation" in out
    # The probe's verdict line comes before the episode's summary (the summary used to overtake it).
    lines = out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if "submission 1: validated" in line)
    assert verdict < next(i for i, line in enumerate(lines) if "episode validated after" in line), out
    assert "agent=scripted (string_pipeline_good.json)" in out
    result = replay(tmp_path / "r1" / "events.jsonl", default_projections())
    assert result.by_type["submission.validated"] == 1 and result.by_type["job.queued"] == 1
    assert result.states["episodes"]["ep-0"].status == "validated"
    assert result.states["run"].status == "finished:ok"  # `ait watch --exit-on-finish` exits on it
    assert "tokens: 0 in (0 cached), 0 out; cost $0.0000" in out
    episode_dir = tmp_path / "r1" / "episodes" / "ep-0"
    manifest = json.loads((episode_dir / "manifest.json").read_text())
    assert manifest["status"] == "validated" and manifest["bundle"]
    trajectory = json.loads((episode_dir / "trajectory.json").read_text())
    assert trajectory[0]["role"] == "system" and any(m.get("role") == "tool" for m in trajectory)
    assert (episode_dir / "workspace" / "job.toml").is_file()


@pytest.mark.slow
def test_episode_trains_the_job_on_the_local_pod_and_ends_with_a_real_reward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The whole chain on the embedded defaults: scripted agent, sandboxed probe, the local pod agent running the
    # CPU trainer (pre-score, GRPO, post-score), and the reward. Shrunk for CI: the first 16 hidden tasks on both
    # sides of the uplift (the episode freezes its baselines on the same 16), 2 training steps of 16 rollouts.
    task = REPO / "examples" / "tasks" / "calc_chain_v1_fast.json"
    smoke = ["eval_limit=16", "max_steps=2", "batch_size=16"]
    argv = ["--runs-root", str(tmp_path), "episode", "--task", str(task), "--run-id", "r2"]
    code = main(argv + [arg for opt in smoke for arg in ("--trainer-opt", opt)])
    out = capsys.readouterr().out
    assert code == 0, out
    result = replay(tmp_path / "r2" / "events.jsonl", default_projections())
    assert result.by_type["job.succeeded"] == 1 and result.by_type["reward.computed"] == 1
    (computed,) = result.states["rewards"].values()
    assert computed.outcome == "scored" and computed.job_status == "succeeded", computed
    # A real post score on the hidden eval (16 tasks: a multiple of 1/16) against the frozen best_pre.
    assert computed.post is not None and (computed.post * 16).is_integer()
    assert computed.best_pre == max(result.states["baselines"]["calc_chain"].values())
    assert result.states["run"].status == "finished:ok"
    assert "n=16 hidden tasks" in out and "train step 1 of 2: mean reward" in out and "post-score" in out
    assert computed.uplift == pytest.approx(computed.post - computed.best_pre)
    assert f"reward {computed.reward:+.4f}" in out, out
    assert "jobs=local pod agent, trainer cpu (tiny-0.6b standing in for Qwen/Qwen3-0.6B: fixtures/tiny)" in out
