"""The compute-provider contract: what every :class:`~handlers.ports.provider.Provider` promises the fleet.

A subclass supplies :meth:`ProviderContract.open` (an async context manager yielding a provider whose pods
live under ``tmp_path`` or in memory) and :meth:`ProviderContract.refused_spec` (a request this provider
refuses); it may override :meth:`ProviderContract.reopen` when a second instance can look at the same
account (the way a resumed controller sees the pods its predecessor started).

The promises:

- ``create_pod`` returns a live pod (pending or running) with the requested name and GPU type, and is
  idempotent by name: a second create with the same name returns the same pod, also through a fresh instance
  of the provider over the same account; once that pod is terminated, the name launches a new one;
- ``get_pod`` of a pod returns it; of an id the provider never issued, ``None``;
- ``terminate_pod`` is idempotent, and terminating an unknown id is not an error; afterwards the pod is gone
  (``None`` or ``GONE``) from ``get_pod`` and ``list_pods``;
- ``list_pods(prefix)`` filters by name prefix, so :func:`~handlers.ports.provider.find_orphans` finds exactly
  one run's untracked pods;
- a refused request raises a :class:`~handlers.ports.provider.ProvisionError` and leaves no live pod behind.
"""

from __future__ import annotations

import abc
import math
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import ClassVar

import pytest

from adapters.pod.tokens import TOKEN_ENV
from handlers.ports.provider import (
    PodInfo,
    PodSpec,
    PodState,
    Provider,
    ProvisionError,
    find_orphans,
    pod_name,
    run_prefix,
)

__all__ = ["ProviderContract"]

RUN = "contract"
LIVE = (PodState.PENDING, PodState.RUNNING)


class ProviderContract(abc.ABC):
    #: a GPU type this provider launches
    gpu_type: ClassVar[str] = "NVIDIA A40"

    @abc.abstractmethod
    def open(self, tmp_path: Path) -> AbstractAsyncContextManager[Provider]:
        """A fresh provider (an empty account) for one test."""

    @abc.abstractmethod
    def refused_spec(self, provider: Provider) -> PodSpec:
        """A pod request this provider refuses (arranging the refusal first where a fake needs it)."""

    def reopen(self, provider: Provider) -> Provider:
        """Another instance over the same account; in-memory providers have only the one."""
        return provider

    def spec(self) -> PodSpec:
        # The bearer token is what the local provider hands its agent; the others ignore it.
        return PodSpec(gpu_type=self.gpu_type, image="ait/pod:contract", env={TOKEN_ENV: "contract-token-0123456789"})

    @pytest.fixture
    async def provider(self, tmp_path: Path) -> AsyncIterator[Provider]:
        async with self.open(tmp_path) as provider:
            try:
                yield provider
            finally:  # no test leaves a pod (a local subprocess) running
                for pod in await provider.list_pods("ait-"):
                    await provider.terminate_pod(pod.provider_id)

    async def _live(self, provider: Provider, name: str) -> list[PodInfo]:
        return [p for p in await provider.list_pods(name) if p.name == name and p.state is not PodState.GONE]

    # ---- the promises ------------------------------------------------------------------------------

    async def test_it_is_a_provider_with_a_name(self, provider: Provider) -> None:
        assert isinstance(provider, Provider)
        assert isinstance(provider.name, str) and provider.name and not provider.name.isspace()

    async def test_create_returns_a_live_pod_with_the_requested_name(self, provider: Provider) -> None:
        name = pod_name(RUN, "p0")
        info = await provider.create_pod(self.spec(), name)
        assert info.name == name and info.provider_id
        assert info.state in LIVE, info
        assert info.gpu_type == self.gpu_type
        assert math.isfinite(info.usd_per_hour) and info.usd_per_hour >= 0

    async def test_create_is_idempotent_by_name(self, provider: Provider) -> None:
        name = pod_name(RUN, "p0")
        first = await provider.create_pod(self.spec(), name)
        again = await provider.create_pod(self.spec(), name)
        assert again.provider_id == first.provider_id
        assert [p.provider_id for p in await self._live(provider, name)] == [first.provider_id]

    async def test_a_resumed_controller_finds_and_reuses_the_pod(self, provider: Provider) -> None:
        name = pod_name(RUN, "p0")
        first = await provider.create_pod(self.spec(), name)
        other = self.reopen(provider)
        assert [p.provider_id for p in await other.list_pods(run_prefix(RUN))] == [first.provider_id]
        again = await other.create_pod(self.spec(), name)
        assert again.provider_id == first.provider_id
        await other.terminate_pod(first.provider_id)
        assert await self._live(provider, name) == []

    async def test_get_returns_the_pod_and_none_for_an_unknown_id(self, provider: Provider) -> None:
        created = await provider.create_pod(self.spec(), pod_name(RUN, "p0"))
        got = await provider.get_pod(created.provider_id)
        assert got is not None
        assert (got.provider_id, got.name, got.gpu_type) == (created.provider_id, created.name, self.gpu_type)
        assert got.state in LIVE
        assert await provider.get_pod("contract0unknown0pod") is None

    async def test_terminate_twice_and_terminate_unknown_are_fine(self, provider: Provider) -> None:
        name = pod_name(RUN, "p0")
        created = await provider.create_pod(self.spec(), name)
        await provider.terminate_pod(created.provider_id)
        await provider.terminate_pod(created.provider_id)
        await provider.terminate_pod("contract0unknown0pod")
        got = await provider.get_pod(created.provider_id)
        assert got is None or got.state is PodState.GONE
        assert await self._live(provider, name) == []

    async def test_a_terminated_name_launches_a_new_pod(self, provider: Provider) -> None:
        name = pod_name(RUN, "p0")
        first = await provider.create_pod(self.spec(), name)
        await provider.terminate_pod(first.provider_id)
        second = await provider.create_pod(self.spec(), name)
        assert second.provider_id != first.provider_id and second.state in LIVE

    async def test_list_filters_by_run_prefix_and_orphans_are_one_runs(self, provider: Provider) -> None:
        pods = {
            (run, pod): await provider.create_pod(self.spec(), pod_name(run, pod))
            for run, pod in (("r1", "p0"), ("r1", "p1"), ("r1-x", "p0"), ("r2", "p0"))
        }
        ids = {key: info.provider_id for key, info in pods.items()}
        listed = {p.provider_id for p in await provider.list_pods(run_prefix("r2"))}
        assert listed == {ids["r2", "p0"]}
        listed = {p.provider_id for p in await provider.list_pods(run_prefix("r1"))}
        assert {ids["r1", "p0"], ids["r1", "p1"]} <= listed and ids["r2", "p0"] not in listed
        orphans = await find_orphans(provider, "r1", keep={ids["r1", "p0"]})
        assert [p.provider_id for p in orphans] == [ids["r1", "p1"]]

    async def test_a_refused_request_raises_a_provision_error_and_leaves_no_pod(self, provider: Provider) -> None:
        name = pod_name(RUN, "refused")
        with pytest.raises(ProvisionError) as caught:
            await provider.create_pod(self.refused_spec(provider), name)
        assert caught.value.kind and str(caught.value)
        assert await self._live(provider, name) == []
