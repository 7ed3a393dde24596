"""`ait train` on a multi-job task spec (offline smoke setup): every episode runs two jobs through the run's
long-lived dispatcher, is rewarded from its final job, and the learner steps over groups of such episodes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli import main
from engine.replay import replay
from handlers.registry import default_projections

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"


def test_train_with_two_jobs_per_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trajectories = tmp_path / "trajectories"
    trajectories.mkdir()
    shutil.copy(ROOT / "fixtures" / "trajectories" / "calc_chain_two_jobs.json", trajectories / "calc_chain_good.json")
    text = SMOKE.read_text()
    text = text.replace('families = ["calc_chain", "string_pipeline"]', 'families = ["calc_chain"]')
    text = text.replace('trajectories = "fixtures/trajectories"', f'trajectories = "{trajectories}"')
    text = text.replace(
        '"examples/tasks/{family}_v1_fast.json"', f'"{ROOT}/examples/tasks/multi/{{family}}_v1_fast_multi.json"'
    )
    text = text.replace("max_steps = 2\n", "max_steps = 1\n")
    config = tmp_path / "multi.toml"
    config.write_text(text)
    assert main(["--runs-root", str(tmp_path), "train", "--config", str(config), "--run-id", "t"]) == 0, (
        capsys.readouterr()
    )
    st = replay(tmp_path / "t" / "events.jsonl", default_projections()).states
    assert st["training"].step == 1 and st["run"].status == "finished:ok"
    assert [s.n_episodes for s in st["training"].steps.values()] == [2]
    episodes = [e for e in st["episodes"].values() if e.episode_id in st["rewards"]]
    assert len(episodes) >= 2  # the learner's group (the next group may have started before the run ended)
    for ep in episodes:
        assert ep.status == "finished" and len(ep.jobs) == 2 and ep.final_job.endswith("-job-2")
        reward = st["rewards"][ep.episode_id]
        assert reward.job_id == ep.final_job and reward.outcome == "scored"
