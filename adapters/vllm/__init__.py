"""Scoring on a GPU pod: vLLM's OpenAI-compatible server + the family's hidden eval run by ``vf-eval``.

- :mod:`.server`: ``vllm serve`` arguments (Qwen3 tool calling), start, ``/health`` wait, stop.
- :mod:`.evalrun`: one ``vf-eval`` run (null harness, subprocess runtime, ``-c`` 8..32, ``--no-push``).
- :mod:`.traces`: ``traces.jsonl`` -> score, reading ``ok`` and errors (the exit code says nothing).
- :mod:`.weights`: prime-rl's final weight broadcast -> a servable model (LoRA adapter or full directory).
- :mod:`.scorer`: :class:`VLLMScorer`, the ``HiddenScorer`` port's GPU implementation.
"""

from __future__ import annotations

from .scorer import ScorerSettings, VLLMScorer
from .types import (
    EvalPackageRef,
    EvalSampling,
    HiddenScore,
    HiddenScorer,
    ScoringFailed,
    ServedModel,
    load_eval_package,
)

__all__ = [
    "EvalPackageRef",
    "EvalSampling",
    "HiddenScore",
    "HiddenScorer",
    "ScorerSettings",
    "ScoringFailed",
    "ServedModel",
    "VLLMScorer",
    "load_eval_package",
]
