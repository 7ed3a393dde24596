"""vLLM's OpenAI-compatible server as a managed child: arguments, start, health wait, stop.

``vllm serve MODEL`` with Qwen3 tool calling (``--enable-auto-tool-choice --tool-call-parser hermes``:
without them a request with tools and ``tool_choice: auto`` gets a 400), bound to 127.0.0.1 so nothing
outside the pod reaches it. A trained LoRA adapter is served next to its base (``--enable-lora
--lora-modules trained=DIR``); a full fine-tune is served as its own model directory. Readiness is
``GET /health`` returning 200, never the process merely running; a server that exits while starting
is reported with its log tail. The server runs in its own process group (vLLM starts engine
processes), stopped as a whole.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import msgspec
import structlog

from adapters.prime_rl.procgroup import GroupProcess, tail_text

__all__ = ["ServeSpec", "ServerFailed", "VLLMServer", "lora_rank_arg", "vllm_serve_args"]

log = structlog.get_logger(__name__)


class ServerFailed(RuntimeError):
    """The server exited or never became healthy; ``log_tail`` holds the end of its output."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class ServeSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What to serve. ``model`` is an HF id or a local directory with config + weights + tokenizer."""

    model: str
    served_name: str = "base"
    lora_modules: dict[str, str] = {}  # served name -> adapter directory
    max_lora_rank: int = 0
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    seed: int = 0
    extra_args: tuple[str, ...] = ()


# vLLM accepts only these --max-lora-rank values; an adapter of a smaller rank fits under a larger maximum.
_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def lora_rank_arg(rank: int) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds an adapter of ``rank``."""
    for allowed in _LORA_RANKS:
        if rank <= allowed:
            return allowed
    raise ValueError(f"LoRA rank {rank} is above vLLM's largest --max-lora-rank {_LORA_RANKS[-1]}")


def vllm_serve_args(spec: ServeSpec, *, host: str, port: int) -> list[str]:
    """The arguments after the executable (``vllm``), starting with ``serve``."""
    args = [
        "serve",
        spec.model,
        "--host",
        host,
        "--port",
        str(port),
        "--served-model-name",
        spec.served_name,
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--gpu-memory-utilization",
        repr(spec.gpu_memory_utilization),
        "--seed",
        str(spec.seed),
    ]
    if spec.max_model_len is not None:
        args += ["--max-model-len", str(spec.max_model_len)]
    if spec.lora_modules:
        args += ["--enable-lora", "--max-lora-rank", str(lora_rank_arg(spec.max_lora_rank))]
        args += ["--lora-modules", *(f"{name}={path}" for name, path in sorted(spec.lora_modules.items()))]
    return [*args, *spec.extra_args]


class VLLMServer:
    """``async with VLLMServer(command, spec, ...) as server:`` serves ``server.base_url`` until the block ends."""

    def __init__(
        self,
        command: Sequence[str],
        spec: ServeSpec,
        *,
        log_path: Path,
        cwd: Path,
        env: Mapping[str, str],
        host: str = "127.0.0.1",
        port: int = 8000,
        health_timeout_s: float = 900.0,
        poll_s: float = 1.0,
        stop_grace_s: float = 30.0,
    ) -> None:
        self.argv = [*command, *vllm_serve_args(spec, host=host, port=port)]
        self.spec = spec
        self.log_path = log_path
        self.cwd = cwd
        self.env = dict(env)
        self.host, self.port = host, port
        self.health_timeout_s = health_timeout_s
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s
        self._proc: GroupProcess | None = None
        self.startup_seconds: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> None:
        started = time.monotonic()
        self._proc = await GroupProcess.start(self.argv, cwd=self.cwd, env=self.env, log_path=self.log_path)
        try:
            await self._wait_healthy()
        except BaseException:
            await self.stop()
            raise
        self.startup_seconds = round(time.monotonic() - started, 3)
        log.info("vllm.healthy", model=self.spec.model, seconds=self.startup_seconds, url=self.base_url)

    async def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.health_timeout_s
        url = f"http://{self.host}:{self.port}/health"
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                if self._proc.returncode is not None or await self._proc.wait(0) is not None:
                    raise ServerFailed(
                        f"vllm serve {self.spec.model} exited with code {self._proc.returncode} before it was healthy",
                        tail_text(self.log_path, 8000),
                    )
                try:
                    if (await client.get(url)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise ServerFailed(
                        f"vllm serve {self.spec.model} not healthy after {self.health_timeout_s:.0f}s",
                        tail_text(self.log_path, 8000),
                    )
                await asyncio.sleep(self.poll_s)

    async def stop(self) -> None:
        if self._proc is not None:
            await self._proc.stop(grace_s=self.stop_grace_s)
            self._proc = None

    async def __aenter__(self) -> VLLMServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.shield(self.stop())
