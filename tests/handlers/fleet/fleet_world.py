"""A small world for dispatcher tests: a run with queued jobs, a fake provider, in-process pod agents."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.pod.inproc import InProcessAgents
from engine.blobs import BlobStore
from engine.log import read_log
from engine.runtime import Runtime
from events import BudgetSet, EventBody, JobQueued, Recorded
from handlers.budget.prices import GpuPrice, PriceTable
from handlers.budget.rules import BudgetGate, BudgetProjection
from handlers.episode.bundle import make_bundle
from handlers.fleet.context import EvalPackages, Ports
from handlers.fleet.dispatcher import Dispatcher
from handlers.fleet.policy import FleetConfig
from handlers.fleet.projection import FleetProjection
from handlers.fleet.queue import QueueProjection
from handlers.ports.inner_trainer import InnerTrainer
from handlers.ports.provider import PodSpec, Provider
from tests.fakes.inner import FakeInnerTrainer

RUN = "r1"
FAST = FleetConfig(
    max_pods=4,
    ladder=("A", "B"),
    tick_s=0.02,
    health_every_s=0.05,
    ready_timeout_s=5.0,
    idle_ttl_s=60.0,
    agent_grace_s=0.5,
    poll_wait_s=0.2,
    error_backoff_s=0.0,
)


def prices(**usd_per_hour: float) -> PriceTable:
    gpus = {name: GpuPrice(usd_per_hour=rate) for name, rate in (usd_per_hour or {"A": 0.0, "B": 0.0}).items()}
    return PriceTable(version=1, taken=dt.date(2026, 11, 30), models={}, gpus=gpus)


def projections() -> list[Any]:
    return [QueueProjection(), FleetProjection(), BudgetProjection()]


def spec(gpu_type: str, pod_id: str, token: str) -> PodSpec:
    return PodSpec(gpu_type=gpu_type, image="test", env={"AIT_POD_TOKEN": token})


def tokens(pod_id: str) -> str:
    return f"token-for-{pod_id}-0123456789"


async def queue_jobs(rt: Runtime, blobs: BlobStore, n: int, *, start: int = 0, time_budget_s: float = 0.0) -> None:
    for i in range(start, start + n):
        bundle = make_bundle({"job.toml": f"[prime_rl]\n# job {i}\n".encode()}, b"{}")
        digest = blobs.put(bundle)
        await rt.emit(
            JobQueued(
                job_id=f"j{i}",
                episode_id=f"e{i}",
                family="calc_chain",
                base_model="tiny",
                bundle=digest,
                time_budget_s=time_budget_s,
            )
        )


class World:
    def __init__(
        self,
        root: Path,
        provider: Provider,
        *,
        trainer: Callable[[], InnerTrainer] = FakeInnerTrainer,
        config: FleetConfig = FAST,
        price_table: PriceTable | None = None,
        eval_packages: EvalPackages | None = None,
    ) -> None:
        self.root = root
        self.eval_packages = eval_packages
        self.provider = provider
        self.agents = InProcessAgents(trainer, root / "agents")
        self.config = config
        self.prices = price_table or prices()
        self.blobs = BlobStore(root / RUN / "blobs")

    def runtime(self) -> Runtime:
        return Runtime(self.root / RUN, projections(), run_id=RUN, durability="none")

    def dispatcher(self, rt: Runtime, *, once: bool = True, config: FleetConfig | None = None) -> Dispatcher:
        ports = Ports(
            provider=self.provider,
            agent=self.agents,
            gate=BudgetGate.for_runtime(rt, self.prices),
            blobs=self.blobs,
            tokens=tokens,
            spec_for=spec,
            eval_packages=self.eval_packages,
        )
        return Dispatcher(rt, ports, config or self.config, once=once)

    def records(self) -> list[Recorded]:
        return read_log(self.root / RUN / "events.jsonl").records

    def events(self, *types: type[EventBody]) -> list[Any]:
        return [r.event for r in self.records() if not types or isinstance(r.event, types)]


def budget(run_usd: float) -> BudgetSet:
    return BudgetSet(run_usd=run_usd)
