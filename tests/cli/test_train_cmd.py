"""`ait train` / `ait resume` / `ait holdout` on the smoke config (offline backend, stand-in inner trainer, local
pods), and the run config's validation: every error names the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main
from cli.train_config import RunConfig, load_run_config
from engine.replay import replay
from handlers.registry import default_projections
from handlers.training import ConfigError
from tests.cli.train_digest import duplicates

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"
SEED = ROOT / "examples" / "configs" / "seed.toml"


def test_the_seed_config_is_the_seed_setup() -> None:
    cfg = load_run_config(SEED)
    o = cfg.outer
    assert (o.base_model, o.lora_rank, o.learning_rate, o.loss_fn) == (
        "Qwen/Qwen3.6-35B-A3B",
        8,
        4e-5,
        "importance_sampling",
    )
    assert (o.group_size, o.batch_size, o.max_steps_off_policy) == (8, 40, 2)
    assert cfg.backend.kind == "tinker" and cfg.agent.kind == "tinker" and cfg.episode.validator == "probe"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ("[outer]\nlora_rank = 0\n", "lora_rank"),
        ("[outr]\n", "unknown table(s) ['outr']"),
        ("[backend]\nkind = 'offline'\n[agent]\nkind = 'tinker'\n", "[agent] kind = 'tinker' needs"),
        ("[backend]\nkind = 'gpu'\n", "[backend] kind: 'gpu'"),
        ("[episode]\nvalidator = 'none'\n", "[episode] validator"),
        ("[episode]\ntask_spec = 'examples/tasks/{family}_v9.json'\n", "no file"),
        ("[episode]\ntemplate = 'examples/replica/nowhere'\n", "bad.toml:6: [episode] template: no directory"),
        ("[episode]\ntemplate = 3\n", "[episode] template"),
        ("[episode]\nrubric_check = 'off'\n", "bad.toml:6: [episode] rubric_check: 'off' is not one of"),
        ("[outer]\nfamilies = ['triage']\n", "held out"),
        ("[fleet]\nmax_pods = 0\n", "max_pods"),
        ("[baselines.calc_chain]\nx = 2.0\n", "[baselines.calc_chain]"),
        ("[run]\nname = 3\n", "[run]"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path: Path, edit: str, needle: str) -> None:
    base = "[backend]\nkind = 'offline'\n[agent]\nkind = 'scripted'\n"
    text = edit if edit.startswith("[backend]") else base + edit
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_run_config(path)
    assert str(path) in str(info.value) and needle in str(info.value)


def test_train_exits_2_on_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[outer]\ngroup_size = 1\n")
    assert main(["--runs-root", str(tmp_path), "train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ait train: ") and str(path) in err and "group_size" in err


def test_smoke_train_resume_and_holdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = str(tmp_path)
    assert main(["--runs-root", runs, "train", "--config", str(SMOKE), "--run-id", "s"]) == 0
    out = capsys.readouterr().out
    assert "run s: 2 learner step(s) applied, sampler v2" in out and "offline backend" in out
    run = tmp_path / "s"
    st = replay(run / "events.jsonl", default_projections()).states
    assert st["training"].step == 2 and st["run"].status == "finished:ok"
    assert [s.n_episodes for s in st["training"].steps.values()] == [2, 2]
    assert (run / "checkpoints" / "step_000002.state.json").is_file()
    # Each learner step is a training cost in the ledger; a replay re-prices them and finds nothing different.
    assert main(["--runs-root", runs, "costs", "--by", "kind"]) == 0
    table = capsys.readouterr().out
    assert any(line.strip("│ ").startswith("training ") for line in table.splitlines()), table
    assert main(["--runs-root", runs, "replay", "s", "--verify"]) == 0
    assert "0 differ" in capsys.readouterr().out

    # More steps on the same run: the open group continues with its ids, nothing runs twice.
    assert main(["--runs-root", runs, "resume", "s", "--max-steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "run s resumed: step 2 of 3, sampler v2, 1 open group(s)" in out and "3 learner step(s) applied" in out
    # The resume recorded the step it ran to: `ait watch` shows the run at its new plan, not past its first one.
    assert main(["--runs-root", runs, "watch", "s", "--once"]) == 0
    assert "step 3 of 3" in capsys.readouterr().out
    assert duplicates(run) == []
    learner = json.loads((run / "checkpoints" / "step_000003.state.json").read_text())
    assert learner["steps"] == 3 and learner["adam_steps"] == 3
    assert main(["--runs-root", runs, "resume", "s", "--max-steps", "3"]) == 0  # nothing left to do
    assert "3 learner step(s) applied" in capsys.readouterr().out

    # Holdout on triage with no --trajectory: the scripted agent replays fixtures/trajectories/triage_good.json.
    ckpt = "offline:checkpoints/step_000002.sampler.json"
    assert main(["--runs-root", runs, "holdout", "--checkpoint", ckpt, "--family", "triage", "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "| checkpoint | outer steps | mean reward | validated | inner jobs succeeded | worst episode |" in out
    assert f"| `{ckpt}` |" in out and "| 2/2 | 2/2 |" in out
    doc = json.loads((run / "holdout" / "v2.json").read_text())
    assert doc["episodes"] == ["ho00000", "ho00001"] and doc["family"] == "triage"
    st = replay(run / "events.jsonl", default_projections()).states
    assert all(st["episodes"][e].group_id == "holdout-v2" and e not in st["training"].episodes for e in doc["episodes"])
    for e in doc["episodes"]:  # each wrote the triage env, not some other family's
        assert st["episodes"][e].family == "triage" and "env/triage_train/tools.py" in st["episodes"][e].files
    # The arm reopened the finished run (run.resumed) and marks it finished again: it is not left "running".
    assert st["run"].resumes == 3 and st["run"].status == "finished:ok"
    assert main(["--runs-root", runs, "report", "s", "--out", str(tmp_path / "report")]) == 0
    overview = (tmp_path / "report" / "report.md").read_text()
    assert "| status | finished:ok |" in overview and "; 2 of them holdout (in no outer step)" in overview
    # --trajectory overrides it for every episode (the base model's arm here): this one writes the calc_chain env.
    traj = str(ROOT / "fixtures" / "trajectories" / "calc_chain_good.json")
    base_arm = ["holdout", "--checkpoint", "base", "--run", "s", "-n", "1", "--trajectory", traj]
    assert main(["--runs-root", runs, *base_arm]) == 0
    assert "| base model | 0 |" in capsys.readouterr().out
    assert json.loads((run / "holdout" / "v0.json").read_text())["episodes"] == ["ho00002"]
    st = replay(run / "events.jsonl", default_projections()).states
    assert "env/calc_chain_train/tools.py" in st["episodes"]["ho00002"].files

    assert main(["--runs-root", runs, "holdout", "--checkpoint", "offline:nope"]) == 2
    assert "no run under" in capsys.readouterr().err
    assert main(["--runs-root", runs, "holdout", "--checkpoint", "offline:nope", "--run", "s"]) == 2
    assert "never published it" in capsys.readouterr().err
    assert main(["--runs-root", runs, "holdout", "--checkpoint", "base", "--run", "s", "--family", "calc_chain"]) == 2
    assert "is trained on" in capsys.readouterr().err
    # A held-out family with no <family>_good.json under the run's trajectories: a clear error, exit 2.
    real = RunConfig.trajectory_path
    missing = tmp_path / "triage_good.json"
    monkeypatch.setattr(RunConfig, "trajectory_path", lambda cfg, f: missing if f == "triage" else real(cfg, f))
    assert main(["--runs-root", runs, "holdout", "--checkpoint", "base", "--run", "s"]) == 2
    err = capsys.readouterr().err
    assert f"no scripted trajectory {missing}" in err and "--trajectory" in err


def test_resume_refuses_a_run_that_is_not_a_train_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--runs-root", str(tmp_path), "resume", "nope"]) == 2
    assert "no run at 'nope'" in capsys.readouterr().err


def test_a_run_without_a_run_cap_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `run_usd = inf` is recorded in run.started as JSON null (JSON has no infinity): resume reads it back as no cap.
    config = tmp_path / "uncapped.toml"
    config.write_text(SMOKE.read_text().replace("run_usd = 5.0", "run_usd = inf"))
    runs = ["--runs-root", str(tmp_path)]
    assert main([*runs, "train", "--config", str(config), "--run-id", "u", "--max-steps", "1"]) == 0
    assert main([*runs, "resume", "u", "--max-steps", "2"]) == 0, capsys.readouterr().err
    assert "2 learner step(s) applied" in capsys.readouterr().out
    budget = replay(tmp_path / "u" / "events.jsonl", default_projections()).states["budget"]
    assert budget.run_cap is None


def test_reward_and_wandb_tables_reach_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`[reward]` changes the weights every reward.computed records (and replay --verify recomputes with them);
    `[wandb]` in offline mode writes a W&B run while `ait train` runs."""
    config = tmp_path / "weighted.toml"
    wandb_dir = tmp_path / "wandb-files"
    config.write_text(
        SMOKE.read_text()
        + "\n[reward]\nw_validation = 0.5\nw_quality = 0.45\nw_speed = 0.05\nvalidation_decay = 0.8\n"
        + f"\n[wandb]\nproject = 'ait-test'\nmode = 'offline'\ndir = '{wandb_dir}'\n"
    )
    runs = ["--runs-root", str(tmp_path)]
    assert main([*runs, "train", "--config", str(config), "--run-id", "w", "--max-steps", "1"]) == 0
    log = tmp_path / "w" / "events.jsonl"
    rewards = [json.loads(line)["body"] for line in log.read_text().splitlines() if '"reward.computed"' in line]
    assert rewards and {(r["w_validation"], r["w_quality"], r["validation_decay"]) for r in rewards} == {
        (0.5, 0.45, 0.8)
    }
    capsys.readouterr()
    assert main([*runs, "replay", "w", "--verify"]) == 0, capsys.readouterr().out
    runs_written = list((wandb_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert runs_written and runs_written[0].stat().st_size > 0


def test_reward_and_wandb_tables_are_validated(tmp_path: Path) -> None:
    for edit, needle in [
        ("[reward]\nw_quality = 'high'\n", "reward.w_quality"),
        ("[reward]\nvalidation_decay = 0\n", "reward.validation_decay"),
        ("[reward]\nweight = 1\n", "[reward] has unknown key(s) ['weight']"),
        ("[wandb]\nmode = 'offline'\n", "project"),
        ("[wandb]\nproject = 'p'\nmode = 'sometimes'\n", "wandb.mode"),
    ]:
        path = tmp_path / "bad.toml"
        path.write_text(SMOKE.read_text() + "\n" + edit)
        with pytest.raises(ConfigError) as info:
            load_run_config(path)
        assert str(path) in str(info.value) and needle in str(info.value), (edit, str(info.value))
