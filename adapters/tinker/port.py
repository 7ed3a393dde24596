"""The slice of the Tinker SDK (0.38) the outer loop uses, as Protocols shaped exactly like the SDK.

Every request returns at once with an awaitable future (the SDK's ``APIFuture``); requests on one training
client execute in submission order, so ``forward_backward`` then ``optim_step`` are submitted before either
is awaited. After one failed request a training client is *poisoned*: every later request fails, and the
caller must create a new client from the last saved state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from tinker import types

__all__ = ["SamplingClientLike", "ServiceLike", "TrainingClientLike"]


class SamplingClientLike(Protocol):
    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> Awaitable[types.SampleResponse]: ...


class TrainingClientLike(Protocol):
    def forward_backward(
        self, data: list[types.Datum], loss_fn: Any, loss_fn_config: Mapping[str, float] | None = None
    ) -> Awaitable[types.ForwardBackwardOutput]: ...

    def optim_step(self, optim_params: types.AdamParams) -> Awaitable[types.OptimStepResponse]: ...

    def save_state(self, name: str) -> Awaitable[types.SaveWeightsResponse]: ...

    def save_weights_for_sampler(self, name: str) -> Awaitable[types.SaveWeightsForSamplerResponse]: ...


class ServiceLike(Protocol):
    """Client factories. Async here (the real adapter runs the SDK's blocking creation in a thread)."""

    async def create_lora_training_client(self, base_model: str, rank: int) -> TrainingClientLike: ...

    async def create_training_client_from_state_with_optimizer(self, path: str) -> TrainingClientLike: ...

    async def create_sampling_client(self, model_path: str | None, base_model: str | None) -> SamplingClientLike: ...
