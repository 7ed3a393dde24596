"""The real Tinker service: the only module that constructs a ``tinker.ServiceClient``. Never used in tests.

Client creation is synchronous in the SDK and, offline, blocks ~5 minutes retrying; it runs in a worker
thread with a timeout so the event loop never stalls. The API key comes from ``TINKER_API_KEY`` (read by the
SDK itself); it is never logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import tinker

from .port import SamplingClientLike, TrainingClientLike

__all__ = ["TinkerService", "real_service_client"]


def real_service_client(base_url: str | None = None) -> Any:
    """A real ``tinker.ServiceClient`` (lazy: no network call until its first request). Never called in tests."""
    return tinker.ServiceClient(base_url=base_url)


_real_client = real_service_client


class TinkerService:
    """The SDK's ``ServiceClient`` behind async methods. ``client_factory`` builds it (the real SDK by default;
    tests pass one that returns an SDK-shaped fake, so no test ever constructs a real client)."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        create_timeout_s: float = 600.0,
        client_factory: Callable[[str | None], Any] = _real_client,
    ) -> None:
        self._base_url = base_url
        self._timeout = create_timeout_s
        self._factory = client_factory
        self._sc: Any = None

    def _service(self) -> Any:
        if self._sc is None:
            self._sc = self._factory(self._base_url)  # lazy: nothing is constructed before the first call
        return self._sc

    async def _in_thread(self, fn: Any) -> Any:
        return await asyncio.wait_for(asyncio.to_thread(fn), self._timeout)

    async def supported_models(self) -> list[tuple[str, bool, bool]]:
        """``(model name, trainable, sampleable)`` for every model the service offers (also proves the key)."""
        sc = self._service()
        caps = await self._in_thread(sc.get_server_capabilities)
        return [(m.model_name or "", bool(m.trainable), bool(m.sampleable)) for m in caps.supported_models]

    async def create_lora_training_client(self, base_model: str, rank: int) -> TrainingClientLike:
        sc = self._service()
        client: TrainingClientLike = await self._in_thread(
            lambda: sc.create_lora_training_client(base_model, rank=rank).result()
        )
        return client

    async def create_training_client_from_state_with_optimizer(self, path: str) -> TrainingClientLike:
        sc = self._service()
        client: TrainingClientLike = await self._in_thread(
            lambda: sc.create_training_client_from_state_with_optimizer(path).result()
        )
        return client

    async def create_sampling_client(self, model_path: str | None, base_model: str | None) -> SamplingClientLike:
        sc = self._service()
        client: SamplingClientLike = await self._in_thread(
            lambda: sc.create_sampling_client(model_path=model_path, base_model=base_model).result()
        )
        return client
