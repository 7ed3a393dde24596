"""PrimeRLRunner end to end on CPU with the stand-in `uv`, `rl` and `inference` (fixtures/prime_rl/standins).

Every failure class is produced by the stand-ins writing what the real processes write, and read back by
the runner from the same files; after every job no process of it is left running.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.prime_rl.config import build_rl_config
from adapters.prime_rl.runner import PrimeRLRunner, child_environment, load_task_spec
from handlers.episode.job_config import load_job_config
from handlers.ports.inner_trainer import JobBundle

from .conftest import Recorder, SkillScorer, eval_source_for, make_bundle, processes_in, standin_settings

pytestmark = pytest.mark.timeout(120)


async def run_job(
    tmp_path: Path,
    eval_pkg_root: Path,
    *,
    mode: str = "ok",
    bundle: JobBundle | None = None,
    scorer: SkillScorer | None = None,
    **settings: object,
):
    bundle = bundle or make_bundle(tmp_path)
    s = standin_settings(tmp_path, mode=mode, **settings)
    scorer = scorer or SkillScorer()
    rec = Recorder()
    runner = PrimeRLRunner(s, scorer=scorer, eval_source=eval_source_for(eval_pkg_root))
    result = await runner.run(bundle, rec)
    work = Path(s.work_root) / bundle.job_id
    assert processes_in(work) == [], "a process of the job outlived it"
    return result, rec, scorer, work


async def test_lora_job_trains_reports_progress_and_scores_pre_and_post(tmp_path: Path, eval_pkg_root: Path) -> None:
    result, rec, scorer, work = await run_job(tmp_path, eval_pkg_root)
    assert result.ok, result.detail
    assert result.failure is None
    assert result.pre == 0.0 and result.post == pytest.approx(0.6)  # the stand-in's final skill file
    # Progress: every step with reward and loss, in order, then the scoring phases.
    steps = [p for p in rec.events if p.phase == "train" and p.step]
    assert sorted({p.step for p in steps}) == [1, 2, 3, 4]
    last = {p.step: p for p in steps}
    assert all(last[s].reward is not None and last[s].loss is not None for s in (1, 2, 3, 4))
    assert all(p.total_steps == 4 for p in steps)
    phases = [p.phase for p in rec.events]
    assert phases.index("pre_score") > max(i for i, p in enumerate(phases) if p == "train")
    assert phases[-1] == "post_score"
    # The metrics are what the stand-in wrote under the real key names.
    rows = [json.loads(x) for x in (work / "train/outputs/rl/metrics.jsonl").read_text().splitlines()]
    rewards = [r["train/agg/all/agent/reward/mean"] for r in rows if "train/agg/all/agent/reward/mean" in r]
    assert result.metrics["reward_last"] == rewards[-1] and result.metrics["reward_first"] == rewards[0]
    assert result.metrics["steps_done"] == 4.0
    assert result.metrics["peak_memory_gib"] == pytest.approx(11.9)
    assert set(result.timings) >= {"install", "dry_run", "train", "pre_score", "post_score", "total"}
    assert result.train_seconds == result.timings["train"] > 0
    assert "T=1" in result.sampling and "n=200" in result.sampling
    # The config written is exactly the generator's, and the trained adapter was served for "post".
    bundle = make_bundle(tmp_path / "again")
    expected = build_rl_config(
        load_job_config(bundle.path / "job.toml"), load_task_spec(bundle.path / "task_spec.json")
    )
    assert (work / "train" / "rl.toml").read_text() == expected.rl_toml
    (pre_model, package, sampling), (post_model, _, _) = scorer.calls
    assert pre_model.name == "base" and pre_model.lora_path is None
    assert post_model.lora_path == str(work / "train/outputs/rl/broadcasts/step_4") and post_model.lora_rank == 8
    assert package.family == "calc_chain" and package.tasks == 200
    assert sampling.max_turns == 8 and sampling.temperature == 1.0


async def test_full_finetune_on_one_gpu_serves_a_built_model_dir(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path, lora_rank=0)
    result, _, scorer, work = await run_job(tmp_path, eval_pkg_root, bundle=bundle, gpus=1)
    assert result.ok, result.detail
    assert (work / "train" / "inference.toml").exists()
    assert "Application startup complete" in (work / "train/logs/inference_server.log").read_text()
    post_model = scorer.calls[-1][0]
    served = Path(post_model.weights_dir or "")
    assert served == work / "score" / "served_model"
    assert (served / "config.json").resolve().parent.name == "abc123"  # from the base snapshot
    assert (served / "model.safetensors").read_bytes() == b"standin-weights"  # the trained weights, not the base
    assert not (served / "STABLE").exists()
    assert result.post == pytest.approx(0.6)


async def test_refused_config_starts_no_process(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path)
    text = (bundle.path / "job.toml").read_text().replace("batch_size = 16", "batch_size = 12")
    (bundle.path / "job.toml").write_text(text)
    result, rec, scorer, work = await run_job(tmp_path, eval_pkg_root, bundle=bundle)
    assert (result.ok, result.failure) == (False, "config_error")
    assert "[prime_rl].batch_size = 12" in result.detail and "multiple of group_size" in result.detail
    assert not (work / "train" / "logs" / "install.log").exists()
    assert scorer.calls == [] and rec.events == []


async def test_dry_run_config_error_fails_before_training(tmp_path: Path, eval_pkg_root: Path) -> None:
    result, _, scorer, work = await run_job(tmp_path, eval_pkg_root, mode="config_error")
    assert result.failure == "config_error"
    assert "prime-rl refused the config" in result.detail and "Extra inputs are not permitted" in result.detail
    assert (work / "train/logs/dry_run.log").exists() and not (work / "train/logs/rl.log").exists()
    assert scorer.calls == []


async def test_env_id_that_names_no_package_is_a_config_error(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path, env_id="calc-train", module="calc_trainer")
    result, *_ = await run_job(tmp_path, eval_pkg_root, bundle=bundle)
    assert result.failure == "config_error"
    assert "does not name an installed env package" in result.detail and "calc_train" in result.detail


async def test_env_that_cannot_be_imported_is_an_env_crash(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path, env_source="def broken(:\n")
    result, *_ = await run_job(tmp_path, eval_pkg_root, bundle=bundle)
    assert result.failure == "env_crash"
    assert "calc_train" in result.detail and "SyntaxError" in result.detail


async def test_failed_install_is_an_env_crash(tmp_path: Path, eval_pkg_root: Path) -> None:
    cmd = (sys.executable, "-c", "import sys; print('error: Failed to build `calc-train`'); sys.exit(1)")
    result, *_ = await run_job(tmp_path, eval_pkg_root, install_command=cmd)
    assert result.failure == "env_crash"
    assert "installing the env package failed (exit 1)" in result.detail and "Failed to build" in result.detail


async def test_bundle_without_the_env_package_is_a_config_error(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path)
    (bundle.path / "env" / "pyproject.toml").unlink()
    result, *_ = await run_job(tmp_path, eval_pkg_root, bundle=bundle)
    assert result.failure == "config_error" and "[env].path" in result.detail
    # An env path that leaves the bundle is refused, even when a project is there.
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "pyproject.toml").write_text("[project]\nname='x'\n")
    text = (bundle.path / "job.toml").read_text().replace('path = "env"', 'path = "../../outside"')
    (bundle.path / "job.toml").write_text(text)
    result, *_ = await run_job(tmp_path, eval_pkg_root, bundle=bundle)
    assert result.failure == "config_error" and "outside the bundle" in result.detail


@pytest.mark.parametrize(
    ("mode", "reason", "evidence"),
    [
        ("oom", "oom", ["trainer.log", "CUDA out of memory"]),
        ("env_crash", "env_crash", ["envs/train/calc-train.log", "KeyError: 'answer'"]),
        ("trainer_crash", "trainer_crash", ["Trainer failed with exit code 1", "illegal memory access"]),
        ("sigkill", "oom", ["SIGKILL", "OOM killer"]),
        ("no_weights", "trainer_crash", ["no final weights", "broadcasts/step_4/STABLE"]),
    ],
)
async def test_training_failures_are_classified(
    tmp_path: Path, eval_pkg_root: Path, mode: str, reason: str, evidence: list[str]
) -> None:
    result, _rec, scorer, _ = await run_job(tmp_path, eval_pkg_root, mode=mode)
    assert (result.ok, result.failure) == (False, reason), result.detail
    for text in evidence:
        assert text in result.detail
    assert scorer.calls == []  # a dead job is never scored
    assert result.train_seconds > 0 and result.log_tail
    if mode != "no_weights":
        assert result.metrics["steps_done"] == 1.0  # the stand-in failed at step 2


@pytest.mark.parametrize("mode", ["hang", "hang_ignore_term"])
async def test_time_budget_stops_the_whole_process_group(tmp_path: Path, eval_pkg_root: Path, mode: str) -> None:
    bundle = make_bundle(tmp_path, time_budget_s=5)  # 60% for training: 3 s
    result, rec, scorer, _work = await run_job(tmp_path, eval_pkg_root, mode=mode, bundle=bundle)
    assert result.failure == "timeout"
    assert "time budget of 3s" in result.detail
    assert result.timings["total"] >= 3.0  # the budget counts from the job's start (install + dry run too)
    assert result.train_seconds < 3.0 + 5
    assert scorer.calls == []
    assert any(p.step == 1 for p in rec.events)  # progress arrived before the hang


async def test_every_rollout_erroring_stops_the_run_as_an_env_crash(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path, max_steps=10)
    result, *_ = await run_job(
        tmp_path, eval_pkg_root, mode="all_errors", bundle=bundle, env={"STANDIN_RL_STEP_S": "0.3"}
    )
    assert result.failure == "env_crash" and "every rollout errored for 3 consecutive steps" in result.detail
    assert 3 <= result.metrics["steps_done"] < 10


async def test_a_process_left_behind_by_training_is_killed_before_scoring(tmp_path: Path, eval_pkg_root: Path) -> None:
    seen: list[list[int]] = []
    bundle = make_bundle(tmp_path)
    s = standin_settings(tmp_path, mode="straggler")
    work = Path(s.work_root) / bundle.job_id
    runner = PrimeRLRunner(
        s, scorer=SkillScorer(), eval_source=eval_source_for(eval_pkg_root, lambda job: seen.append(processes_in(work)))
    )
    result = await runner.run(bundle, Recorder())
    assert result.ok and result.metrics["stragglers_killed"] == 1.0
    assert seen == [[]]  # when the hidden eval package was requested, nothing of training was alive


async def test_scoring_failures_are_scoring_errors(tmp_path: Path, eval_pkg_root: Path) -> None:
    result, *_ = await run_job(tmp_path, eval_pkg_root, scorer=SkillScorer(fail_on="trained"))
    assert result.failure == "scoring_error" and "eval episodes errored" in result.detail
    assert result.pre == 0.0 or result.pre is None
    assert result.log_tail == "vllm log tail" and result.train_seconds > 0


async def test_eval_package_of_another_family_is_refused(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path)
    bundle = JobBundle(job_id=bundle.job_id, family="ledger", root=bundle.root)
    s = standin_settings(tmp_path)

    async def wrong(job: JobBundle) -> Path:
        return eval_pkg_root / "ait-eval-calc-chain"

    result = await PrimeRLRunner(s, scorer=SkillScorer(), eval_source=wrong).run(bundle, Recorder())
    assert result.failure == "scoring_error" and "'calc_chain'" in result.detail


async def test_one_gpu_inference_server_oom(tmp_path: Path, eval_pkg_root: Path) -> None:
    result, *_ = await run_job(tmp_path, eval_pkg_root, gpus=1, env={"STANDIN_INFERENCE_MODE": "oom"})
    assert result.failure == "oom" and "No available memory for the cache blocks" in result.detail


async def test_cancelling_a_job_leaves_nothing_running(tmp_path: Path, eval_pkg_root: Path) -> None:
    bundle = make_bundle(tmp_path)
    s = standin_settings(tmp_path, mode="hang")
    rec = Recorder()
    task = asyncio.create_task(
        PrimeRLRunner(s, scorer=SkillScorer(), eval_source=eval_source_for(eval_pkg_root)).run(bundle, rec)
    )
    for _ in range(200):
        await asyncio.sleep(0.05)
        if any(p.step == 1 for p in rec.events):
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert processes_in(Path(s.work_root) / bundle.job_id) == []


def test_a_retried_job_starts_from_a_clean_directory(tmp_path: Path, eval_pkg_root: Path) -> None:
    async def twice() -> None:
        bundle = make_bundle(tmp_path)
        runner = PrimeRLRunner(
            standin_settings(tmp_path), scorer=SkillScorer(), eval_source=eval_source_for(eval_pkg_root)
        )
        first = await runner.run(bundle, Recorder())
        second = await runner.run(bundle, Recorder())
        assert first.ok and second.ok  # prime-rl refuses a used run dir; the runner must not reuse one

    asyncio.run(twice())


@given(st.dictionaries(st.from_regex(r"[A-Z][A-Z_]{0,12}", fullmatch=True), st.text(max_size=5), max_size=12))
def test_child_environment_passes_no_secret_looking_variable(parent: dict[str, str]) -> None:
    parent = {**parent, "HF_TOKEN": "t", "RUNPOD_API_KEY": "k", "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0"}
    env = child_environment({"EXTRA": "1"}, parent)
    assert env["EXTRA"] == "1" and env["PATH"] == "/bin" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "HF_TOKEN" not in env and "RUNPOD_API_KEY" not in env
    for name in env:
        if name != "EXTRA":
            assert not any(s in name.upper() for s in ("KEY", "TOKEN", "SECRET", "PASSW")), name


def test_rl_toml_written_by_the_runner_parses(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path)
    cfg = build_rl_config(load_job_config(bundle.path / "job.toml"), load_task_spec(bundle.path / "task_spec.json"))
    assert tomllib.loads(cfg.rl_toml)["orchestrator"]["train"]["source"][0]["env"]["taskset"]["id"] == "calc-train"
