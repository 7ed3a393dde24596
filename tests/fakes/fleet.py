"""A fake compute provider at the :class:`~handlers.ports.provider.Provider` port, and a stock-out wrapper.

:class:`FakeProvider` keeps pods in memory (URL ``fake://<id>``) and can be told which GPU types are out of
stock, which errors to raise next, and to kill a pod. :class:`StockOutProvider` wraps any provider (the
local one in the fault tests) and refuses the listed GPU types with :class:`StockOut`.
"""

from __future__ import annotations

from typing import ClassVar

from handlers.ports.provider import PodInfo, PodSpec, PodState, Provider, ProvisionError, StockOut

__all__ = ["FakeProvider", "StockOutProvider"]


class FakeProvider:
    name: ClassVar[str] = "fake"

    def __init__(self, *, boot_polls: int = 1, stock_out: set[str] | None = None, usd_per_hour: float = 0.0) -> None:
        self.boot_polls = boot_polls
        self.stock_out = set(stock_out or ())
        self.usd_per_hour = usd_per_hour
        self.fail_next: list[ProvisionError] = []
        self.pods: dict[str, PodInfo] = {}
        self._polls: dict[str, int] = {}
        self.creates: list[tuple[str, str]] = []  # (name, gpu type) of every create that launched a pod
        self.attempts: list[str] = []  # gpu type of every create call
        self.terminated: list[str] = []
        self.specs: list[PodSpec] = []

    def add(self, name: str, gpu_type: str = "A", state: PodState = PodState.RUNNING) -> PodInfo:
        """A pod that exists at the provider (e.g. one a crashed controller had launched)."""
        pid = f"fp-{len(self.pods)}"
        info = PodInfo(provider_id=pid, name=name, state=state, gpu_type=gpu_type, url=f"fake://{pid}")
        self.pods[pid] = info
        self._polls[pid] = self.boot_polls
        return info

    def kill(self, provider_id: str) -> None:
        info = self.pods[provider_id]
        self.pods[provider_id] = PodInfo(
            provider_id=provider_id, name=info.name, state=PodState.FAILED, gpu_type=info.gpu_type, url=info.url
        )

    def live(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.state is not PodState.GONE]

    def _view(self, info: PodInfo) -> PodInfo:
        if info.state is PodState.RUNNING and self._polls.get(info.provider_id, 0) < self.boot_polls:
            self._polls[info.provider_id] = self._polls.get(info.provider_id, 0) + 1
            return PodInfo(provider_id=info.provider_id, name=info.name, state=PodState.PENDING, gpu_type=info.gpu_type)
        return info

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        self.attempts.append(spec.gpu_type)
        for info in self.pods.values():
            if info.name == idempotency_name and info.state is not PodState.GONE:
                return self._view(info)
        if self.fail_next:
            raise self.fail_next.pop(0)
        if spec.gpu_type in self.stock_out:
            raise StockOut(f"fake: {spec.gpu_type} out of stock", gpu_type=spec.gpu_type)
        pid = f"fp-{len(self.pods)}"
        info = PodInfo(
            provider_id=pid,
            name=idempotency_name,
            state=PodState.RUNNING,
            gpu_type=spec.gpu_type,
            url=f"fake://{pid}",
            usd_per_hour=self.usd_per_hour,
        )
        self.pods[pid] = info
        self._polls[pid] = 0
        self.creates.append((idempotency_name, spec.gpu_type))
        self.specs.append(spec)
        return self._view(info)

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        info = self.pods.get(provider_id)
        return None if info is None else self._view(info)

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.name.startswith(prefix)]

    async def terminate_pod(self, provider_id: str) -> None:
        info = self.pods.get(provider_id)
        if info is None or info.state is PodState.GONE:
            return
        self.terminated.append(provider_id)
        self.pods[provider_id] = PodInfo(provider_id=provider_id, name=info.name, state=PodState.GONE)


class StockOutProvider:
    """Any provider, with ``out`` GPU types refused as out of stock."""

    def __init__(self, inner: Provider, out: set[str]) -> None:
        self.inner = inner
        self.out = set(out)
        self.refused: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        if spec.gpu_type in self.out:
            self.refused.append(spec.gpu_type)
            raise StockOut(f"{spec.gpu_type}: no longer any instances available (test)", gpu_type=spec.gpu_type)
        return await self.inner.create_pod(spec, idempotency_name)

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        return await self.inner.get_pod(provider_id)

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        return await self.inner.list_pods(prefix)

    async def terminate_pod(self, provider_id: str) -> None:
        await self.inner.terminate_pod(provider_id)
