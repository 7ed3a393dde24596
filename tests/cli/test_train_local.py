"""`ait train` / `ait resume` on the local learner (examples/configs/local_smoke.toml: tiny-0.6b sampled through
the local server, LoRA trained with peft + torch on the CPU), and the run config's rules for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main
from cli.train_config import load_run_config
from engine.replay import replay
from handlers.registry import default_projections
from handlers.training import ConfigError

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "examples" / "configs" / "local_smoke.toml"


def test_the_local_smoke_config_loads() -> None:
    cfg = load_run_config(LOCAL)
    assert (cfg.backend.kind, cfg.backend.device, cfg.agent.kind) == ("local", "auto", "local")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ("[backend]\nkind = 'local'\n[agent]\nkind = 'scripted'\n", "go together"),
        ("[backend]\nkind = 'offline'\n[agent]\nkind = 'local'\n", "go together"),
        ("[backend]\nkind = 'local'\ndevice = 'tpu'\n[agent]\nkind = 'local'\n", "[backend] device: 'tpu'"),
        (
            "[outer]\nloss_fn = 'dro'\n[backend]\nkind = 'local'\n[agent]\nkind = 'local'\n",
            ":2: [outer] loss_fn: 'dro' is not implemented by [backend] kind = 'local'",
        ),
    ],
)
def test_local_config_errors_name_the_file_and_key(tmp_path: Path, edit: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(edit)
    with pytest.raises(ConfigError) as info:
        load_run_config(path)
    assert str(path) in str(info.value) and needle in str(info.value)


@pytest.mark.slow  # the one test of the local backend's wiring end to end: two runs load torch, peft, tiny-0.6b
def test_local_train_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(tmp_path)
    assert main(["--runs-root", runs, "train", "--config", str(LOCAL), "--run-id", "l", "--max-steps", "1"]) == 0
    out = capsys.readouterr().out
    assert "run l: 1 learner step(s) applied, sampler v1" in out and "local LoRA (tiny-0.6b, rank 4, ppo" in out
    run = tmp_path / "l"
    state = run / "checkpoints" / "step_000001.state"
    assert {p.name for p in state.iterdir()} == {"lora.safetensors", "adam.safetensors", "meta.json"}
    assert (run / "checkpoints" / "step_000001.sampler" / "lora.safetensors").is_file()

    assert main(["--runs-root", runs, "resume", "l", "--max-steps", "2"]) == 0
    assert "2 learner step(s) applied" in capsys.readouterr().out
    meta = json.loads((run / "checkpoints" / "step_000002.state" / "meta.json").read_text())
    assert meta["steps"] == 2 and meta["base_model"] == "tiny-0.6b"  # the resumed learner carried on from step 1
    st = replay(run / "events.jsonl", default_projections()).states
    assert st["training"].step == 2 and st["run"].status == "finished:ok"
    turns = [ep for ep in st["training"].episodes.values() if ep.turn_blobs]
    assert turns, "the agent's sampled turns were recorded for the learner"


@pytest.mark.parametrize("name", ["replica.toml", "replica_smoke.toml"])
def test_the_replica_configs_are_reproducible_by_construction(name: str) -> None:
    """Synchronous steps (which sampler an episode uses does not depend on timing), one sampler request per
    forward pass, no wall time in the reward, the replica's template and its two training families."""
    cfg = load_run_config(ROOT / "examples" / "configs" / name)
    assert cfg.outer.max_steps_off_policy == 0 and cfg.outer.episode_concurrency >= cfg.outer.batch_size
    assert (cfg.backend.kind, cfg.backend.device, cfg.backend.sampler_batch) == ("local", "cpu", 1)
    assert cfg.reward.w_speed == 0.0 and cfg.outer.families == ["calc_chain", "ledger"]
    assert cfg.template_dir == ROOT / "examples" / "replica" / "template" and cfg.spec_path("triage").is_file()


def test_the_no_learning_control_is_the_local_learners_only(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[backend]\nkind = 'offline'\nlearn = false\n[agent]\nkind = 'scripted'\n")
    with pytest.raises(ConfigError, match=r"c.toml:3: \[backend\] learn = false is the local learner's control"):
        load_run_config(path)
    path.write_text("[backend]\nkind = 'local'\nlearn = false\n[agent]\nkind = 'local'\n")
    assert load_run_config(path).backend.learn is False
