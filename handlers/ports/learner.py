"""The learner port: what the outer loop needs from a LoRA trainer (Tinker in production, a fake in tests).

``adapters/tinker/learner.py`` implements it over the Tinker SDK (or anything shaped like it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from handlers.training.datums import DatumSpec

__all__ = ["LearnerPort", "StepOutcome"]


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
