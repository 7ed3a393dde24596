"""The learner contract: what every :class:`~handlers.ports.learner.LearnerPort` promises the outer loop.

A subclass supplies :meth:`LearnerContract.learners` (a factory over one backend for one test: ``make("")`` is
a fresh learner, ``make(state_path)`` one resumed from a saved state, the way ``ait train`` resumes) and
:meth:`LearnerContract.applied_steps` (how many optimizer steps a learner's weights have had, read from the
backend), and names the errors its backend raises for a state it cannot resume from.

The promises:

- ``train_step`` applies one step and returns metrics that are finite numbers (they go into the
  ``lora.step_applied`` event as JSON); it refuses an empty batch and a datum whose per-token lists do not
  match its input (``ValueError``), applying nothing;
- ``save(name, with_state=True)`` returns a resumable state path and a sampler path, two different non-empty
  strings; ``with_state=False`` returns ``""`` for the state; each name gets its own sampler path;
- a learner resumed from a saved state path carries on from that state (its optimizer steps), and one asked to
  resume from a path that holds no saved state (a sampler path, or a name never saved) fails rather than
  silently starting afresh.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from handlers.ports.learner import LearnerPort, StepOutcome
from handlers.training import DatumSpec, SampledTurn, trajectory_to_datums

__all__ = ["LearnerContract", "MakeLearner"]

MakeLearner = Callable[[str], LearnerPort]


def batch() -> list[DatumSpec]:
    turns = [
        SampledTurn(prompt_tokens=[5, 6, 7], sampled_tokens=[8, 9], sampled_logprobs=[-0.25, -0.5]),
        SampledTurn(prompt_tokens=[5, 6, 7, 8, 9, 3], sampled_tokens=[4], sampled_logprobs=[-0.1]),
    ]
    return [*trajectory_to_datums(turns, 0.5), *trajectory_to_datums(turns[:1], -0.5)]


async def step(learner: LearnerPort, datums: list[DatumSpec] | None = None) -> StepOutcome:
    return await learner.train_step(
        batch() if datums is None else datums,
        loss_fn="importance_sampling",
        loss_fn_config=None,
        learning_rate=1e-5,
    )


class LearnerContract(abc.ABC):
    #: what the backend raises when asked to resume from a path that holds no state
    resume_errors: ClassVar[tuple[type[BaseException], ...]] = (ValueError, OSError)

    @abc.abstractmethod
    def learners(self, tmp_path: Path) -> MakeLearner:
        """A learner factory over one fresh backend: ``make("")`` starts afresh, ``make(path)`` resumes."""

    @abc.abstractmethod
    def applied_steps(self, learner: LearnerPort) -> int:
        """The optimizer steps in ``learner``'s weights (after it has made at least one request)."""

    @pytest.fixture
    def make(self, tmp_path: Path) -> MakeLearner:
        return self.learners(tmp_path)

    # ---- the promises ------------------------------------------------------------------------------

    async def test_a_step_returns_finite_metrics(self, make: MakeLearner) -> None:
        learner = make("")
        out = await step(learner)
        assert isinstance(out, StepOutcome) and out.metrics
        assert all(isinstance(k, str) and isinstance(v, float) and math.isfinite(v) for k, v in out.metrics.items())
        assert self.applied_steps(learner) == 1

    async def test_an_empty_batch_is_refused(self, make: MakeLearner) -> None:
        learner = make("")
        with pytest.raises(ValueError):
            await step(learner, [])

    async def test_a_misaligned_datum_is_refused_and_nothing_is_applied(self, make: MakeLearner) -> None:
        learner = make("")
        good = batch()[0]
        bad = DatumSpec(
            input_tokens=good.input_tokens,
            target_tokens=good.target_tokens[:-1],
            logprobs=good.logprobs,
            advantages=good.advantages,
            mask=good.mask,
        )
        with pytest.raises(ValueError):
            await step(learner, [good, bad])
        assert self.applied_steps(learner) == 0

    async def test_save_returns_a_state_and_a_sampler_path(self, make: MakeLearner) -> None:
        learner = make("")
        await step(learner)
        state, sampler = await learner.save("step_000001", with_state=True)
        assert state and sampler and state != sampler
        no_state, sampler2 = await learner.save("step_000002", with_state=False)
        assert no_state == "" and sampler2 and sampler2 not in (state, sampler)

    async def test_a_saved_state_resumes_where_it_left_off(self, make: MakeLearner) -> None:
        first = make("")
        await step(first)
        await step(first)
        state, _ = await first.save("step_000002", with_state=True)
        resumed = make(state)
        await step(resumed)
        assert self.applied_steps(resumed) == 3
        state3, sampler3 = await resumed.save("step_000003", with_state=True)
        assert state3 and sampler3 and state3 != state

    async def test_resuming_from_a_path_without_a_state_fails(self, make: MakeLearner) -> None:
        first = make("")
        await step(first)
        state, sampler = await first.save("step_000001", with_state=True)
        for path in (sampler, state.replace("step_000001", "step_000099")):
            with pytest.raises(self.resume_errors):
                await step(make(path))
