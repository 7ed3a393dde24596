"""The scoring port's plain data: what to serve, which hidden eval package, how to sample, what came out.

``HiddenScorer.score(model, package, sampling, workdir)`` is the port the inner runner and ``ait baselines``
call; :class:`adapters.vllm.scorer.VLLMScorer` implements it with vLLM + ``vf-eval``, tests use fakes.
A score always carries its sampling description, so two scores are compared only at the same setting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import msgspec

__all__ = [
    "EvalPackageRef",
    "EvalSampling",
    "HiddenScore",
    "HiddenScorer",
    "ScoringFailed",
    "ServedModel",
    "load_eval_package",
]


class ScoringFailed(RuntimeError):
    """Scoring produced no trustworthy score (server down, eval crashed, too many errored episodes)."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class ServedModel(msgspec.Struct, frozen=True, kw_only=True):
    """A model to score: the base (``path`` None), a LoRA adapter on it, or a full fine-tune directory."""

    name: str  # the name requests use: "base" or "trained"
    base: str  # HF id of the base model
    lora_path: str | None = None
    lora_rank: int = 0
    weights_dir: str | None = None  # a servable directory (config + weights + tokenizer) of a full fine-tune

    @classmethod
    def base_model(cls, model: str) -> ServedModel:
        return cls(name="base", base=model)


class EvalPackageRef(msgspec.Struct, frozen=True, kw_only=True):
    """A built hidden-eval package (``families.eval_env``): its project directory and manifest facts."""

    path: str
    env_id: str
    module: str
    family: str
    tasks: int
    fingerprint: str


def load_eval_package(path: Path | str) -> EvalPackageRef:
    """Read ``<path>/<module>/manifest.json`` of a package project directory."""
    root = Path(path)
    manifests = sorted(root.glob("*/manifest.json"))
    if len(manifests) != 1:
        raise ScoringFailed(f"{root}: expected exactly one <module>/manifest.json, found {len(manifests)}")
    try:
        data = json.loads(manifests[0].read_text(encoding="utf-8"))
        return EvalPackageRef(
            path=str(root),
            env_id=str(data["env_id"]),
            module=str(data["module"]),
            family=str(data["family"]),
            tasks=int(data["tasks"]),
            fingerprint=str(data["fingerprint"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ScoringFailed(f"{manifests[0]}: not an eval package manifest: {exc}") from None


class EvalSampling(msgspec.Struct, frozen=True, kw_only=True):
    temperature: float = 1.0
    max_tokens: int = 1024  # per assistant turn
    max_turns: int = 8
    limit: int | None = None  # first N tasks only (None: all of them)

    def describe(self, n: int) -> str:
        return f"T={self.temperature:g}, max_tokens={self.max_tokens}, max_turns={self.max_turns}, n={n}, r=1"


class HiddenScore(msgspec.Struct, frozen=True, kw_only=True):
    score: float
    n: int
    errored: int
    sampling: str
    seconds: float
    model: str
    fingerprint: str = ""  # of the eval package scored against
    error_types: dict[str, int] = {}


class HiddenScorer(Protocol):
    async def score(
        self, model: ServedModel, package: EvalPackageRef, sampling: EvalSampling, workdir: Path
    ) -> HiddenScore: ...
