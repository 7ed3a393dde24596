"""adapters.vllm.evalrun and VLLMScorer with a fake `vf-eval` (fast; the real one runs in test_scorer_e2e)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import msgspec
import pytest

from adapters.vllm.evalrun import API_KEY_VAR, run_vf_eval, vf_eval_args
from adapters.vllm.scorer import ScorerSettings, VLLMScorer
from adapters.vllm.types import EvalPackageRef, EvalSampling, ScoringFailed, ServedModel, load_eval_package

from .conftest import ROOT, VLLM, free_port

pytestmark = pytest.mark.timeout(120)
RECORDED = ROOT / "fixtures" / "prime_rl" / "traces" / "vf_eval_calc_chain_3.jsonl"

# A fake vf-eval: checks its environment is the scoring one, then writes a recorded traces.jsonl.
FAKE_VF_EVAL = """
import os, shutil, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
name = args[args.index("--run.name") + 1]
assert os.environ["PYTHONPATH"] == {pkg!r}, os.environ["PYTHONPATH"]
assert os.environ[{key!r}] == "local"
assert not any("SECRET" in k for k in os.environ), "a secret leaked into the eval"
os.makedirs(os.path.join(out, name), exist_ok=True)
if {mode!r} != "none":
    shutil.copy({traces!r}, os.path.join(out, name, "traces.jsonl"))
print("vf-eval fake done", args)
"""


def package(tmp_path: Path, tasks: int = 3) -> EvalPackageRef:
    return EvalPackageRef(
        path=str(tmp_path / "pkg"),
        env_id="ait-eval-calc-chain",
        module="ait_eval_calc_chain",
        family="calc_chain",
        tasks=tasks,
        fingerprint="f" * 64,
    )


def fake(tmp_path: Path, pkg: EvalPackageRef, mode: str = "ok") -> list[str]:
    script = tmp_path / "fake_vf_eval.py"
    script.write_text(FAKE_VF_EVAL.format(pkg=pkg.path, key=API_KEY_VAR, mode=mode, traces=str(RECORDED)))
    return [sys.executable, str(script)]


def test_vf_eval_args() -> None:
    pkg = EvalPackageRef(path="/p", env_id="ait-eval-x", module="m", family="x", tasks=200, fingerprint="")
    args = vf_eval_args(
        pkg,
        base_url="http://127.0.0.1:8011/v1",
        model="trained",
        sampling=EvalSampling(temperature=0.7, max_tokens=512, max_turns=6),
        concurrency=16,
        output_dir=Path("/o"),
        run_name="post",
    )
    joined = " ".join(args)
    assert args[0] == "ait-eval-x"
    for part in (
        "--env.agent.harness.id null",
        "--env.agent.runtime.type subprocess",
        "--no-push",
        "--no-rich",
        "-c 16",
        "-r 1",
        "--sampling.temperature 0.7",
        "--sampling.max-tokens 512",
        "--env.agent.max-turns 6",
        f"--client.api-key-var {API_KEY_VAR}",
        "-m trained",
        "-o /o",
    ):
        assert part in joined
    assert "-n" not in args
    limited = vf_eval_args(
        pkg, base_url="u", model="m", sampling=EvalSampling(limit=5), concurrency=8, output_dir=Path("/o"), run_name="r"
    )
    assert limited[-2:] == ["-n", "5"]
    for bad in (4, 128):
        with pytest.raises(ValueError, match="concurrency"):
            vf_eval_args(
                pkg,
                base_url="u",
                model="m",
                sampling=EvalSampling(),
                concurrency=bad,
                output_dir=Path("/o"),
                run_name="r",
            )


async def test_run_vf_eval_parses_traces_and_checks_the_count(tmp_path: Path) -> None:
    pkg = package(tmp_path)
    os.environ["AIT_TEST_SECRET"] = "x"  # must not reach the eval process
    try:
        run = await run_vf_eval(
            fake(tmp_path, pkg),
            pkg,
            base_url="http://h/v1",
            model="trained",
            sampling=EvalSampling(),
            workdir=tmp_path / "w",
        )
    finally:
        del os.environ["AIT_TEST_SECRET"]
    assert run.outcome.n == 3 and run.proc.returncode == 0
    with pytest.raises(ScoringFailed, match="produced 3 episodes, expected 5"):
        await run_vf_eval(
            fake(tmp_path, package(tmp_path, tasks=5)),
            package(tmp_path, tasks=5),
            base_url="u",
            model="m",
            sampling=EvalSampling(),
            workdir=tmp_path / "w2",
        )
    with pytest.raises(ScoringFailed, match=r"wrote no out/eval/traces\.jsonl") as info:
        await run_vf_eval(
            fake(tmp_path, pkg, mode="none"),
            pkg,
            base_url="u",
            model="m",
            sampling=EvalSampling(),
            workdir=tmp_path / "w3",
        )
    assert "vf-eval fake done" in info.value.log_tail


async def test_scorer_refuses_a_mostly_errored_eval_and_stops_the_server(tmp_path: Path) -> None:
    pkg = package(tmp_path)
    env = {"PYTHONPATH": str(ROOT)}
    settings = ScorerSettings(
        vllm_command=VLLM, vf_eval_command=tuple(fake(tmp_path, pkg)), port=free_port(), health_timeout_s=20, env=env
    )
    scorer = VLLMScorer(settings)
    with pytest.raises(ScoringFailed, match=r"1/3 eval episodes of base errored \(\{'ProviderError': 1\}\)"):
        await scorer.score(ServedModel.base_model("Qwen/Qwen3-0.6B"), pkg, EvalSampling(), tmp_path / "s1")
    lenient = VLLMScorer(msgspec.structs.replace(settings, port=free_port(), max_error_fraction=0.5))
    result = await lenient.score(ServedModel.base_model("Qwen/Qwen3-0.6B"), pkg, EvalSampling(), tmp_path / "s2")
    assert result.score == pytest.approx(1 / 3) and result.n == 3 and result.errored == 1
    assert result.sampling == "T=1, max_tokens=1024, max_turns=8, n=3, r=1"
    assert "Shutting down" in (tmp_path / "s2" / "vllm.log").read_text()  # stopped by SIGTERM, cleanly


async def test_scorer_reports_a_server_that_cannot_start(tmp_path: Path) -> None:
    pkg = package(tmp_path)
    settings = ScorerSettings(
        vllm_command=VLLM,
        vf_eval_command=("false",),
        port=free_port(),
        health_timeout_s=20,
        env={"PYTHONPATH": str(ROOT), "STANDIN_VLLM_MODE": "oom"},
    )
    with pytest.raises(ScoringFailed, match="serving trained") as info:
        await VLLMScorer(settings).score(
            ServedModel(name="trained", base="Qwen/Qwen3-0.6B", lora_path="/a", lora_rank=8),
            pkg,
            EvalSampling(),
            tmp_path / "s",
        )
    assert "CUDA out of memory" in info.value.log_tail


def test_load_eval_package_reads_the_manifest(tmp_path: Path) -> None:
    from families.eval_env import build_eval_package

    info = build_eval_package("calc_chain", tmp_path)
    ref = load_eval_package(info.path)
    assert (ref.env_id, ref.module, ref.family, ref.tasks, ref.fingerprint) == (
        info.env_id,
        info.module,
        "calc_chain",
        200,
        info.fingerprint,
    )
    with pytest.raises(ScoringFailed, match="exactly one"):
        load_eval_package(tmp_path)
