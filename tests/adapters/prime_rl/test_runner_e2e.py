"""The whole GPU job path on CPU: stand-in `rl` trains, then the *real* verifiers 0.4.0 `vf-eval` scores the
base and the trained LoRA adapter, each served by the stand-in `vllm` (an OpenAI-compatible SSE server playing
the family's reference solver on the fraction of tasks its skill file says). Slow: two `vf-eval` runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from adapters.prime_rl.runner import PrimeRLRunner
from adapters.vllm.scorer import ScorerSettings, VLLMScorer

from .conftest import STANDINS, Recorder, eval_source_for, free_port, make_bundle, processes_in, standin_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
VF_EVAL = Path(sys.executable).parent / "vf-eval"


@pytest.fixture(scope="session")
def uv_cache(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VF_EVAL.exists() or shutil.which("uv") is None:
        pytest.skip("vf-eval (verifiers) or uv is not installed")
    cache = getattr(pytestconfig, "cache", None)
    home = cache.mkdir("vf-eval-home") if cache is not None else tmp_path_factory.mktemp("vf-eval-home")
    return home / "uv"  # shared with tests/families/test_evalpkg_e2e.py: the harness deps download once


async def test_job_scored_by_real_vf_eval_against_the_standin_vllm(
    tmp_path: Path, eval_pkg_root: Path, uv_cache: Path
) -> None:
    bundle = make_bundle(tmp_path, max_steps=3)
    scorer = VLLMScorer(
        ScorerSettings(
            vllm_command=(sys.executable, str(STANDINS / "vllm.py")),
            vf_eval_command=(str(VF_EVAL),),
            port=free_port(),
            concurrency=8,
            health_timeout_s=60,
            eval_timeout_s=600,
            env={"UV_CACHE_DIR": str(uv_cache), "STANDIN_VLLM_BASE_SKILL": "0.0"},
        )
    )
    # Two tasks per side: each rollout is a harness process, and pre 0 / post 1 reads the same on two.
    settings = standin_settings(tmp_path, eval_limit=2, env={"STANDIN_RL_SKILL": "1.0"})
    rec = Recorder()
    result = await PrimeRLRunner(settings, scorer=scorer, eval_source=eval_source_for(eval_pkg_root)).run(bundle, rec)
    work = Path(settings.work_root) / bundle.job_id
    assert result.ok, (result.detail, result.log_tail)
    assert (result.pre, result.post) == (0.0, 1.0)
    assert result.metrics["pre_n"] == 2.0 and result.metrics["post_n"] == 2.0
    assert result.metrics["post_errored"] == 0.0
    assert result.sampling == "T=1, max_tokens=1024, max_turns=8, n=2, r=1"
    # vf-eval asked the adapter's name for "post" and the base's name for "pre", through the LoRA server.
    post_log = (work / "score" / "post" / "vllm.log").read_text()
    assert "model=Qwen/Qwen3-0.6B" in post_log
    traces = sorted((work / "score" / "post" / "eval" / "out").glob("*/traces.jsonl"))
    assert len(traces) == 1 and traces[0].parent.name == "trained"
    assert processes_in(work) == []
    print(f"timings: {result.timings}")
