"""The provider contract for every provider: local subprocesses, Runpod (its v2 API faked over
``httpx.MockTransport``), the simulation, and the test fakes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec

from adapters.local_provider import LocalProvider
from adapters.runpod import RunpodProvider
from adapters.sim.catalog import SimGpu
from adapters.sim.provider import SimProvider
from handlers.ports.provider import InvalidPodRequest, PodSpec, Provider
from tests.adapters import runpod_contract as rc
from tests.contracts.provider_contract import ProviderContract
from tests.fakes.fleet import FakeProvider, StockOutProvider

# A pod process that costs nothing to start: the contract is about the provider's bookkeeping and process
# handling; the real `ait pod-agent` behind a local pod is exercised in tests/adapters/test_local_provider.py.
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


class TestLocalProvider(ProviderContract):
    gpu_type = "local"

    @asynccontextmanager
    async def open(self, tmp_path: Path) -> AsyncIterator[Provider]:
        yield LocalProvider(SLEEPER, tmp_path / "pods", term_grace_s=1.0)

    def reopen(self, provider: Provider) -> Provider:
        assert isinstance(provider, LocalProvider)
        return LocalProvider(SLEEPER, provider.state_dir, term_grace_s=1.0)

    def refused_spec(self, provider: Provider) -> PodSpec:
        return PodSpec(gpu_type=self.gpu_type, image="local")  # no bearer token for the agent


class TestRunpodProvider(ProviderContract):
    def _provider(self) -> RunpodProvider:
        return RunpodProvider("rpa_CONTRACTTESTKEY0000000000", transport=self.fake.transport(), sleep=rc.Sleeps())

    @asynccontextmanager
    async def open(self, tmp_path: Path) -> AsyncIterator[Provider]:
        self.fake = rc.FakeRunpod()  # the account; pytest gives every test its own instance of this class
        self.others: list[RunpodProvider] = []
        async with self._provider() as provider:
            yield provider
        for other in self.others:
            await other.aclose()

    def reopen(self, provider: Provider) -> Provider:
        self.others.append(self._provider())
        return self.others[-1]

    def refused_spec(self, provider: Provider) -> PodSpec:
        return msgspec.structs.replace(self.spec(), gpu_count=0)  # refused before any request is sent


class TestSimProvider(ProviderContract):
    gpu_type = "SIM-A40"
    ladder = (SimGpu(gpu_type="SIM-A40", usd_per_hour=0.49), SimGpu(gpu_type="SIM-NONE", usd_per_hour=1.0, capacity=0))

    @asynccontextmanager
    async def open(self, tmp_path: Path) -> AsyncIterator[Provider]:
        yield SimProvider(clock=lambda: 0.0, ladder=self.ladder)

    def refused_spec(self, provider: Provider) -> PodSpec:
        return msgspec.structs.replace(self.spec(), gpu_type="SIM-NONE")  # a market that never has one


class TestFakeProvider(ProviderContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path) -> AsyncIterator[Provider]:
        yield FakeProvider()

    def refused_spec(self, provider: Provider) -> PodSpec:
        assert isinstance(provider, FakeProvider)
        provider.fail_next.append(InvalidPodRequest("fake: refused on request"))
        return self.spec()


class TestStockOutProvider(ProviderContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path) -> AsyncIterator[Provider]:
        yield StockOutProvider(FakeProvider(), out={"NVIDIA H100"})

    def refused_spec(self, provider: Provider) -> PodSpec:
        return msgspec.structs.replace(self.spec(), gpu_type="NVIDIA H100")
