"""A fake learner at the :class:`~handlers.ports.learner.LearnerPort` port: records its steps and saves, checks
datum alignment as Tinker would, and "saves" states into a dict that learners built on it can resume from.

It replaces the ad hoc learners the outer-loop tests used to define (a recording one, a slow one, a minimal one):
``FakeLearner()`` records, ``FakeLearner(delay=0.003)`` is slow, ``prefix=""`` gives bare ``s/<name>`` and
``w/<name>`` paths.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from handlers.ports.learner import DatumSpec, StepOutcome, check_batch

__all__ = ["FakeLearner", "Step"]

Step = tuple[list[DatumSpec], str, dict[str, float] | None, float]  # (datums, loss_fn, loss_fn_config, lr)


class FakeLearner:
    def __init__(
        self,
        *,
        loss: float = 0.0,
        delay: float = 0.0,
        prefix: str = "tinker://",
        store: dict[str, int] | None = None,
        resume_state_path: str = "",
    ) -> None:
        self.loss = loss
        self.delay = delay
        self.prefix = prefix
        self.store: dict[str, int] = {} if store is None else store  # state path -> optimizer steps at save
        self.steps: list[Step] = []  # every train_step this learner applied
        self.saves: list[tuple[str, bool]] = []  # (name, with_state) of every save
        self.applied = 0  # optimizer steps in the weights, the resumed ones included
        if resume_state_path:
            if resume_state_path not in self.store:
                raise ValueError(f"fake learner: no saved state {resume_state_path!r}")
            self.applied = self.store[resume_state_path]

    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        check_batch(datums)
        await asyncio.sleep(self.delay)
        self.steps.append((list(datums), loss_fn, loss_fn_config, learning_rate))
        self.applied += 1
        return StepOutcome(metrics={"loss:sum": self.loss})

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        self.saves.append((name, with_state))
        state_path = f"{self.prefix}s/{name}" if with_state else ""
        if state_path:
            self.store[state_path] = self.applied
        return state_path, f"{self.prefix}w/{name}"
