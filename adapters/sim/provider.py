"""A simulated compute provider behind the real :class:`~handlers.ports.provider.Provider` port (SIMULATED).

Pods exist only in memory: they boot after a sampled latency, may die after an exponential lifetime,
and creates can fail with :class:`StockOut` per the simulated market. Time comes from an injected
clock (virtual in tests, ``time.monotonic`` for a dry run), so the dispatcher can be exercised at
scale without a GPU. Every pod's URL is ``sim://...`` and its raw status starts with ``simulated-``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

import msgspec

from handlers.ports.provider import InvalidPodRequest, PodInfo, PodSpec, PodState, Provider, StockOut

from .catalog import DEFAULT_LADDER, SimGpu, StockProcess

__all__ = ["SimProvider"]


class _SimPod(msgspec.Struct, kw_only=True):
    provider_id: str
    name: str
    gpu: SimGpu
    gpu_count: int
    created_s: float
    ready_s: float
    death_s: float
    terminated_s: float | None = None


class SimProvider:
    name: ClassVar[str] = "sim"

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        ladder: Sequence[SimGpu] = DEFAULT_LADDER,
        seed: int = 0,
        provision_median_s: float = 120.0,
        provision_sigma: float = 0.25,
        pod_mttf_s: float | None = None,
    ) -> None:
        self._clock = clock
        self._gpus = {g.gpu_type: g for g in ladder}
        self._stock = {g.gpu_type: StockProcess(g, random.Random(f"{seed}:stock:{g.gpu_type}")) for g in ladder}
        self._rng = random.Random(f"{seed}:sim-provider")
        self._median = provision_median_s
        self._sigma = provision_sigma
        self._mttf = pod_mttf_s
        self._pods: dict[str, _SimPod] = {}

    def __repr__(self) -> str:
        return f"SimProvider(simulated=True, pods={len(self._pods)})"

    def _state(self, pod: _SimPod, now: float) -> PodState:
        if pod.terminated_s is not None:
            return PodState.GONE
        if now >= pod.death_s:
            return PodState.FAILED
        return PodState.RUNNING if now >= pod.ready_s else PodState.PENDING

    def _info(self, pod: _SimPod, now: float) -> PodInfo:
        state = self._state(pod, now)
        return PodInfo(
            provider_id=pod.provider_id,
            name=pod.name,
            state=state,
            gpu_type=pod.gpu.gpu_type,
            gpu_count=pod.gpu_count,
            usd_per_hour=pod.gpu.usd_per_hour * pod.gpu_count,
            url=f"sim://{pod.provider_id}",
            raw_status=f"simulated-{state.value}",
            created_at=f"{pod.created_s:.3f}",
        )

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        now = self._clock()
        for pod in self._pods.values():
            if pod.name == idempotency_name and pod.terminated_s is None:
                return self._info(pod, now)
        gpu = self._gpus.get(spec.gpu_type)
        if gpu is None:
            raise InvalidPodRequest(f"sim: unknown GPU type {spec.gpu_type!r} (known: {', '.join(self._gpus)})")
        live = sum(1 for p in self._pods.values() if p.gpu is gpu and self._state(p, now) is not PodState.GONE)
        if (gpu.capacity is not None and live >= gpu.capacity) or self._stock[gpu.gpu_type].out_of_stock(now):
            raise StockOut(f"sim: {gpu.gpu_type} is out of stock (simulated)", gpu_type=gpu.gpu_type)
        ready = now + self._median * math.exp(self._sigma * self._rng.gauss(0.0, 1.0))
        death = ready + self._rng.expovariate(1 / self._mttf) if self._mttf else math.inf
        pod = _SimPod(
            provider_id=f"sim-{len(self._pods) + 1:05d}",
            name=idempotency_name,
            gpu=gpu,
            gpu_count=spec.gpu_count,
            created_s=now,
            ready_s=ready,
            death_s=death,
        )
        self._pods[pod.provider_id] = pod
        return self._info(pod, now)

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        pod = self._pods.get(provider_id)
        return self._info(pod, self._clock()) if pod is not None else None

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        now = self._clock()
        return [self._info(p, now) for p in self._pods.values() if p.name.startswith(prefix)]

    async def terminate_pod(self, provider_id: str) -> None:
        pod = self._pods.get(provider_id)
        if pod is not None and pod.terminated_s is None:
            pod.terminated_s = self._clock()

    def billed_usd(self) -> float:
        """Simulated spend so far: each pod from creation to termination or death."""
        now = self._clock()
        total = 0.0
        for pod in self._pods.values():
            end = min(x for x in (pod.terminated_s, pod.death_s, now) if x is not None)
            total += pod.gpu.usd_per_hour * pod.gpu_count * max(0.0, end - pod.created_s) / 3600.0
        return total


if TYPE_CHECKING:

    def _implements_the_port(p: SimProvider) -> Provider:  # mypy checks the structural match
        return p
