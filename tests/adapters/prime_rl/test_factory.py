"""adapters.prime_rl.factory: the pod agent's `--trainer prime_rl` wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.prime_rl.factory import hidden_package_source, make_trainer, visible_gpus
from adapters.vllm.types import load_eval_package
from handlers.ports.inner_trainer import JobBundle


def test_gpu_count_comes_from_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert visible_gpus() == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == 0


def test_make_trainer_uses_the_bootstrap_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    t = make_trainer({"root": "/srv/ait", "score_pre": "0", "eval_limit": "20"})
    assert t.name == "prime-rl"
    s = t.settings
    assert (s.gpus, s.prime_rl_dir, s.work_root, s.score_pre, s.eval_limit) == (
        2,
        "/srv/ait/prime-rl",
        "/srv/ait/jobs",
        False,
        20,
    )
    assert t.scorer.settings.vf_eval_command == ("/srv/ait/score-venv/bin/vf-eval",)  # type: ignore[attr-defined]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="needs 1 or 2 GPUs, found 0"):
        make_trainer({})


def test_the_training_uid_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert make_trainer({}).settings.train_uid is None
    assert make_trainer({"train_uid": "61234"}).settings.train_uid == 61234
    auto = make_trainer({"train_uid": "auto"}).settings.train_uid
    assert auto is not None and auto > 1000
    with pytest.raises(ValueError, match="train_uid='0'; expected none, auto or a uid above 0"):
        make_trainer({"train_uid": "0"})
    with pytest.raises(ValueError, match="expected none, auto or a uid above 0"):
        make_trainer({"train_uid": "²"})  # a digit to str.isdigit() that int() refuses


async def test_hidden_package_is_built_into_the_jobs_scoring_dir(tmp_path: Path) -> None:
    source = hidden_package_source(tmp_path)
    path = await source(JobBundle(job_id="j9", family="calc_chain", root=str(tmp_path / "b")))
    assert path.parent == tmp_path / "j9" / "score" / "hidden"
    assert load_eval_package(path).tasks == 200


def test_a_pod_runner_gets_its_eval_package_from_the_agent_never_from_its_own_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from adapters.pod.core import AgentCore
    from adapters.prime_rl.factory import controller_only_source

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    runner = make_trainer({"root": str(tmp_path)})
    assert runner.eval_source is controller_only_source
    core = AgentCore(runner, tmp_path / "agent")
    assert runner.eval_source == core.await_eval
    local = make_trainer({"root": str(tmp_path), "eval_from": "local"})
    assert local.eval_source is not controller_only_source
    with pytest.raises(ValueError, match="eval_from"):
        make_trainer({"root": str(tmp_path), "eval_from": "pod"})
