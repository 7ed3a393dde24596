"""The learner over a Tinker training client (real or fake): implements ``handlers.training.LearnerPort``.

Poisoned-client rule: if any request fails, the client is dropped; the next call builds a fresh one from
the last saved *state* path (weights + Adam state), or a fresh LoRA when nothing was saved yet. The failed
call itself re-raises, so the caller decides whether to retry the step.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from tinker import types

from handlers.ports.learner import DatumSpec, StepOutcome, check_batch

from .convert import to_datum
from .port import ServiceLike, TrainingClientLike

__all__ = ["TinkerLearner"]

log = structlog.get_logger(__name__)


class TinkerLearner:
    def __init__(self, service: ServiceLike, *, base_model: str, rank: int, resume_state_path: str = "") -> None:
        self._service = service
        self.base_model = base_model
        self.rank = rank
        self.last_state_path = resume_state_path
        self._client: TrainingClientLike | None = None
        self.clients_created = 0

    async def _training_client(self) -> TrainingClientLike:
        if self._client is None:
            if self.last_state_path:
                self._client = await self._service.create_training_client_from_state_with_optimizer(
                    self.last_state_path
                )
            else:
                self._client = await self._service.create_lora_training_client(self.base_model, self.rank)
            self.clients_created += 1
        return self._client

    def _poisoned(self, what: str, exc: BaseException) -> None:
        log.warning("tinker.client_poisoned", request=what, error=type(exc).__name__, resume_from=self.last_state_path)
        self._client = None

    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        if not datums:
            raise ValueError("train_step: no datums")
        client = await self._training_client()
        check_batch(datums)
        data = [to_datum(d) for d in datums]
        try:
            # Both submitted before awaiting either: they land in the same server clock cycle.
            fb = client.forward_backward(data, loss_fn, loss_fn_config)
            opt = client.optim_step(types.AdamParams(learning_rate=learning_rate))
            out = await fb
            opt_out = await opt
        except Exception as exc:
            self._poisoned("train_step", exc)
            raise
        metrics = {k: float(v) for k, v in out.metrics.items()}
        for k, v in (opt_out.metrics or {}).items():
            metrics[f"optim/{k}"] = float(v)
        return StepOutcome(metrics=metrics)

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        client = await self._training_client()
        try:
            state_path = (await client.save_state(name)).path if with_state else ""
            sampler_path = (await client.save_weights_for_sampler(name)).path
        except Exception as exc:
            self._poisoned("save", exc)
            raise
        if state_path:
            self.last_state_path = state_path
        return state_path, sampler_path
