"""The hidden-eval scorer on a GPU pod: serve a model with vLLM, run the family's eval with ``vf-eval``, stop.

One ``score()`` call = one server lifetime: start ``vllm serve`` for the model (base, LoRA adapter on
its base, or a full fine-tune directory), wait for ``/health``, run every task of the eval package once,
parse ``traces.jsonl``, stop the server's whole process group. A score is refused
(:class:`ScoringFailed`) when more than ``max_error_fraction`` of the episodes errored: that measures the
infrastructure, not the model.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

import msgspec
import structlog

from .evalrun import run_vf_eval
from .server import ServerFailed, ServeSpec, VLLMServer
from .types import EvalPackageRef, EvalSampling, HiddenScore, ScoringFailed, ServedModel

__all__ = ["ScorerSettings", "VLLMScorer", "serve_spec"]

log = structlog.get_logger(__name__)


class ScorerSettings(msgspec.Struct, frozen=True, kw_only=True):
    vllm_command: tuple[str, ...] = ("vllm",)  # e.g. ("/opt/prime-rl/.venv/bin/vllm",)
    vf_eval_command: tuple[str, ...] = ("vf-eval",)  # from the scoring venv (verifiers 0.4.0)
    host: str = "127.0.0.1"
    port: int = 8011  # not prime-rl's 8000/8100, in case a training server were still closing
    concurrency: int = 16
    max_model_len: int | None = 8192
    gpu_memory_utilization: float = 0.9
    health_timeout_s: float = 900.0
    eval_timeout_s: float = 3600.0
    max_error_fraction: float = 0.1
    env: dict[str, str] = {}  # extra environment for both processes (HF_HOME, UV_CACHE_DIR, ...)


def serve_spec(model: ServedModel, settings: ScorerSettings) -> ServeSpec:
    if model.lora_path is not None:
        return ServeSpec(
            model=model.base,
            served_name="base",
            lora_modules={model.name: model.lora_path},
            max_lora_rank=model.lora_rank,
            max_model_len=settings.max_model_len,
            gpu_memory_utilization=settings.gpu_memory_utilization,
        )
    return ServeSpec(
        model=model.weights_dir or model.base,
        served_name=model.name,
        max_model_len=settings.max_model_len,
        gpu_memory_utilization=settings.gpu_memory_utilization,
    )


class VLLMScorer:
    """:class:`adapters.vllm.types.HiddenScorer` with a real (or stand-in) ``vllm`` and ``vf-eval``."""

    def __init__(self, settings: ScorerSettings | None = None, *, server_env: Mapping[str, str] | None = None) -> None:
        self.settings = settings or ScorerSettings()
        self._server_env = dict(server_env) if server_env is not None else None

    def _server_environment(self) -> dict[str, str]:
        base = self._server_env if self._server_env is not None else dict(os.environ)
        return {**base, **self.settings.env}

    async def score(
        self, model: ServedModel, package: EvalPackageRef, sampling: EvalSampling, workdir: Path
    ) -> HiddenScore:
        s = self.settings
        started = time.monotonic()
        server = VLLMServer(
            s.vllm_command,
            serve_spec(model, s),
            log_path=workdir / "vllm.log",
            cwd=workdir,
            env=self._server_environment(),
            host=s.host,
            port=s.port,
            health_timeout_s=s.health_timeout_s,
        )
        try:
            async with server:
                run = await run_vf_eval(
                    list(s.vf_eval_command),
                    package,
                    base_url=server.base_url,
                    model=model.name,
                    sampling=sampling,
                    workdir=workdir / "eval",
                    concurrency=s.concurrency,
                    timeout_s=s.eval_timeout_s,
                    env=s.env,
                    run_name=model.name,
                )
        except ServerFailed as exc:
            raise ScoringFailed(f"serving {model.name} ({model.base}) failed: {exc}", exc.log_tail) from None
        outcome = run.outcome
        if outcome.error_fraction > s.max_error_fraction:
            raise ScoringFailed(
                f"{outcome.errored}/{outcome.n} eval episodes of {model.name} errored "
                f"({outcome.error_types}); first: {outcome.first_error}"
            )
        seconds = round(time.monotonic() - started, 3)
        log.info("vllm.scored", model=model.name, family=package.family, score=outcome.score, n=outcome.n, s=seconds)
        return HiddenScore(
            score=outcome.score,
            n=outcome.n,
            errored=outcome.errored,
            sampling=sampling.describe(outcome.n),
            seconds=seconds,
            model=model.name,
            fingerprint=package.fingerprint,
            error_types=outcome.error_types,
        )
