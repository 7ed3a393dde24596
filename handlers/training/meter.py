"""The outer loop's training meter: each learner step reserved before it runs and settled after, as kind ``training``.

The step's token count is known before the call (:func:`~handlers.budget.training_cost.step_train_tokens`), so
the reservation is the exact price: a run or global cap that cannot cover it refuses the step
(:class:`~handlers.budget.rules.BudgetRefused`: the run stops, nothing was trained). A step that fails after
submission is charged at the reservation: Tinker may have billed it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from handlers.budget.rules import BudgetGate
from handlers.budget.training_cost import step_train_tokens, training_usd
from handlers.training.datums import DatumSpec

__all__ = ["GateMeter", "TrainingMeter"]


class TrainingMeter(Protocol):
    def step(self, step: int, datums: Sequence[DatumSpec]) -> contextlib.AbstractAsyncContextManager[None]:
        """Around one learner step: pay for it (or refuse it) on entry, record what it cost on a clean exit."""
        ...


class GateMeter:
    """Charges learner steps through the run's budget gate, priced for ``item`` (the model, or ``offline``)."""

    def __init__(self, gate: BudgetGate, item: str) -> None:
        if gate.prices is None:
            raise ValueError("GateMeter needs a BudgetGate with a price table")
        gate.prices.model(item)  # an unknown item fails at wiring time, not after the first batch
        self.gate = gate
        self.item = item

    @contextlib.asynccontextmanager
    async def step(self, step: int, datums: Sequence[DatumSpec]) -> AsyncIterator[None]:
        assert self.gate.prices is not None
        tokens = step_train_tokens(datums)
        usd = training_usd(self.gate.prices, self.item, tokens)
        if usd == 0.0:  # a free learner (offline): nothing to reserve, but the ledger still shows its tokens
            yield
            await self.gate.record_free("training", f"step-{step}", item=self.item, train_tokens=tokens)
            return
        async with self.gate.hold("training", f"step-{step}", usd, item=self.item, on_error="charge") as hold:
            yield
            await hold.settle(usd, train_tokens=tokens)
