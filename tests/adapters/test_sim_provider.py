"""The simulated provider behind the real provider port: lifecycle on a virtual clock, stock-outs,
idempotent creates, orphan discovery, billing. All SIMULATED."""

from __future__ import annotations

import pytest

from adapters.sim import SimGpu, SimProvider, StockProcess
from handlers.ports.provider import (
    InvalidPodRequest,
    PodSpec,
    PodState,
    Provider,
    StockOut,
    find_orphans,
    pod_name,
    run_prefix,
)

OK = SimGpu(gpu_type="ok", usd_per_hour=3.6)
OUT = SimGpu(gpu_type="out", usd_per_hour=1.0, stockout_fraction=1.0)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def spec(gpu: str = "ok") -> PodSpec:
    return PodSpec(gpu_type=gpu, image="img")


async def test_lifecycle_on_the_clock() -> None:
    clock = Clock()
    p = SimProvider(clock=clock, ladder=(OK,), provision_median_s=100, provision_sigma=0, pod_mttf_s=None)
    assert isinstance(p, Provider)
    info = await p.create_pod(spec(), pod_name("r", "p1"))
    assert info.state is PodState.PENDING and info.url.startswith("sim://") and "simulated" in info.raw_status
    clock.t = 99.0
    assert (await p.get_pod(info.provider_id)).state is PodState.PENDING  # type: ignore[union-attr]
    clock.t = 100.0
    assert (await p.get_pod(info.provider_id)).state is PodState.RUNNING  # type: ignore[union-attr]
    clock.t = 3600.0
    await p.terminate_pod(info.provider_id)
    await p.terminate_pod(info.provider_id)  # idempotent
    clock.t = 7200.0
    assert (await p.get_pod(info.provider_id)).state is PodState.GONE  # type: ignore[union-attr]
    assert p.billed_usd() == pytest.approx(3.6)  # one hour at 3.6/h, nothing after termination
    assert await p.get_pod("nope") is None


async def test_pods_die_after_their_lifetime() -> None:
    clock = Clock()
    p = SimProvider(clock=clock, ladder=(OK,), pod_mttf_s=60.0, provision_median_s=1)
    info = await p.create_pod(spec(), "ait-r-p1")
    clock.t = 1e6
    assert (await p.get_pod(info.provider_id)).state is PodState.FAILED  # type: ignore[union-attr]


async def test_stock_out_and_unknown_gpu() -> None:
    p = SimProvider(clock=Clock(), ladder=(OUT, OK))
    with pytest.raises(StockOut) as caught:
        await p.create_pod(spec("out"), "ait-r-p1")
    assert caught.value.gpu_type == "out" and caught.value.kind == "stock_out"
    assert (await p.create_pod(spec("ok"), "ait-r-p1")).gpu_type == "ok"  # the next rung
    with pytest.raises(InvalidPodRequest, match="unknown GPU"):
        await p.create_pod(spec("H9000"), "ait-r-p2")


async def test_create_is_idempotent_by_name_and_capacity_is_enforced() -> None:
    capped = SimGpu(gpu_type="capped", usd_per_hour=1.0, capacity=1)
    p = SimProvider(clock=Clock(), ladder=(capped,))
    first = await p.create_pod(spec("capped"), "ait-r-p1")
    assert (await p.create_pod(spec("capped"), "ait-r-p1")).provider_id == first.provider_id
    with pytest.raises(StockOut):
        await p.create_pod(spec("capped"), "ait-r-p2")
    await p.terminate_pod(first.provider_id)
    assert (await p.create_pod(spec("capped"), "ait-r-p2")).provider_id != first.provider_id


async def test_find_orphans_through_the_port() -> None:
    p = SimProvider(clock=Clock(), ladder=(OK,))
    kept = await p.create_pod(spec(), pod_name("run1", "a"))
    orphan = await p.create_pod(spec(), pod_name("run1", "b"))
    gone = await p.create_pod(spec(), pod_name("run1", "c"))
    await p.terminate_pod(gone.provider_id)
    await p.create_pod(spec(), pod_name("run1-x", "d"))
    assert len(await p.list_pods(run_prefix("run1"))) == 4  # the prefix alone over-matches run1-x
    found = await find_orphans(p, "run1", keep={kept.provider_id})
    assert [o.provider_id for o in found] == [orphan.provider_id]


def test_stock_process_long_run_fraction_and_persistence() -> None:
    import itertools
    import random

    gpu = SimGpu(gpu_type="g", usd_per_hour=1, stockout_fraction=0.3, mean_outage_s=600.0)
    stock = StockProcess(gpu, random.Random(0))
    samples = [stock.out_of_stock(t * 10.0) for t in range(200_000)]
    assert 0.25 < sum(samples) / len(samples) < 0.35
    flips = sum(a != b for a, b in itertools.pairwise(samples))
    assert flips < len(samples) / 20  # spells, not per-query coin flips
