"""adapters.vllm.server: `vllm serve` arguments, health wait and stop, against the stand-in vllm."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from adapters.prime_rl.procgroup import group_alive
from adapters.vllm.server import ServerFailed, ServeSpec, VLLMServer, lora_rank_arg, vllm_serve_args

from .conftest import ROOT, VLLM, free_port

pytestmark = pytest.mark.timeout(120)


def test_serve_args_enable_qwen3_tool_calls_and_lora() -> None:
    args = vllm_serve_args(
        ServeSpec(model="Qwen/Qwen3-0.6B", lora_modules={"trained": "/w/step_4"}, max_lora_rank=12, max_model_len=4096),
        host="127.0.0.1",
        port=8011,
    )
    assert args[:2] == ["serve", "Qwen/Qwen3-0.6B"]
    joined = " ".join(args)
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in joined
    assert "--host 127.0.0.1 --port 8011" in joined and "--served-model-name base" in joined
    assert "--enable-lora --max-lora-rank 16 --lora-modules trained=/w/step_4" in joined
    assert "--max-model-len 4096" in joined
    plain = vllm_serve_args(ServeSpec(model="/m", served_name="trained"), host="h", port=1)
    assert "--enable-lora" not in plain and "--max-model-len" not in plain


@pytest.mark.parametrize(("rank", "arg"), [(1, 8), (8, 8), (9, 16), (64, 64), (65, 128), (256, 256)])
def test_lora_rank_rounds_up_to_a_value_vllm_accepts(rank: int, arg: int) -> None:
    assert lora_rank_arg(rank) == arg


def server(tmp_path: Path, **env: str) -> VLLMServer:
    return VLLMServer(
        VLLM,
        ServeSpec(model="Qwen/Qwen3-0.6B", served_name="base"),
        log_path=tmp_path / "vllm.log",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        port=free_port(),
        health_timeout_s=20,
        poll_s=0.1,
        stop_grace_s=2,
    )


async def test_server_is_healthy_then_stopped_with_its_group(tmp_path: Path) -> None:
    srv = server(tmp_path)
    async with srv:
        assert srv.startup_seconds is not None
        async with httpx.AsyncClient() as client:
            assert (await client.get(srv.base_url.removesuffix("/v1") + "/health")).status_code == 200
            models = (await client.get(srv.base_url + "/models")).json()
        assert models["data"][0]["id"] == "base"
        pgid = srv._proc.pgid  # type: ignore[union-attr]
    assert not group_alive(pgid)


async def test_server_that_dies_while_starting_reports_its_log(tmp_path: Path) -> None:
    with pytest.raises(ServerFailed, match="exited with code 1 before it was healthy") as info:
        await server(tmp_path, STANDIN_VLLM_MODE="oom").start()
    assert "CUDA out of memory" in info.value.log_tail


async def test_server_that_never_gets_healthy_times_out_and_is_stopped(tmp_path: Path) -> None:
    srv = server(tmp_path, STANDIN_VLLM_MODE="hang")
    srv.health_timeout_s = 1.5
    with pytest.raises(ServerFailed, match="not healthy after 2s"):
        await srv.start()
    assert srv._proc is None
