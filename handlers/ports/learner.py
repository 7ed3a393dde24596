"""The learner port: what the outer loop needs from a LoRA trainer (Tinker in production, a fake in tests).

``adapters/tinker/learner.py`` implements it over the Tinker SDK (or anything shaped like it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

__all__ = ["DatumSpec", "LearnerPort", "StepOutcome", "check_batch"]


class DatumSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A Tinker datum in plain lists; every list has the length of ``input_tokens``."""

    input_tokens: list[int]
    target_tokens: list[int]
    logprobs: list[float]
    advantages: list[float]
    mask: list[float]

    @property
    def n_trained(self) -> int:
        return int(sum(self.mask))


def check_batch(datums: Sequence[DatumSpec]) -> None:
    """What every learner refuses before applying anything: an empty batch, or a datum whose per-token lists
    are not all as long as its ``input_tokens``."""
    if not datums:
        raise ValueError("train_step: no datums")
    for i, d in enumerate(datums):
        n = len(d.input_tokens)
        for key in ("target_tokens", "logprobs", "advantages", "mask"):
            if len(getattr(d, key)) != n:
                raise ValueError(f"datum {i}: {key} has {len(getattr(d, key))} entries for {n} input tokens")


class StepOutcome(msgspec.Struct, frozen=True, kw_only=True):
    metrics: dict[str, float]


class LearnerPort(Protocol):
    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        """One forward-backward over ``datums`` and one optimizer step (both submitted before awaiting).

        An empty batch, or a datum whose lists do not all have its input's length, raises ``ValueError``.
        The metrics are finite numbers (they are recorded in ``lora.step_applied``)."""
        ...

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        """Save sampler weights (and, if ``with_state``, resumable state): ``(state_path or "", sampler_path)``.

        A learner built to resume from ``state_path`` carries on from that state; only a state path resumes."""
        ...
