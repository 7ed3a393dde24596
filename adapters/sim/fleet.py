"""The fleet simulation: the REAL dispatcher and fleet policy, on virtual time, against a simulated market.

:func:`simulate` opens a real :class:`~engine.runtime.Runtime` (its log written synchronously to a temporary
directory), queues the jobs as ``job.queued`` events at their arrival times, and runs the product's
:class:`~handlers.fleet.dispatcher.Dispatcher` with the run's ``[fleet]`` config and a real
:class:`~handlers.budget.rules.BudgetGate` over the simulated prices. Behind the ports sit the simulated
provider (:class:`~.provider.SimProvider`: provision latency, stock-outs, bootstrap failures, pod deaths) and
simulated pod agents (:class:`~.agent.SimPodAgents`: a job takes its work / the pod's speed). Every decision
(which job, which pod, which rung, when to launch, reap, requeue, reserve) is the dispatcher's own; this
module only feeds jobs in, waits for the last one, and reads the log and the market's meters.

Seeded and deterministic: the market's randomness comes from the seed and the loop's clock is virtual, so a
run is a pure function of (jobs, config). Every output is labelled SIMULATED.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from engine.blobs import BlobStore
from engine.runtime import Runtime
from events import BudgetSet, JobQueued, Recorded
from handlers.budget.prices import GpuPrice, PriceTable
from handlers.budget.rules import BudgetGate, BudgetProjection
from handlers.fleet.context import Ports
from handlers.fleet.dispatcher import Dispatcher
from handlers.fleet.policy import FleetConfig, parse_rung
from handlers.fleet.projection import FleetProjection, pod_of_ref
from handlers.fleet.queue import QueueProjection
from handlers.ports.provider import PodSpec

from .agent import SimPodAgents
from .catalog import DEFAULT_LADDER, SimGpu
from .durations import SimJob
from .metrics import lower_bound_s
from .provider import SimProvider
from .results import GpuUsage, JobOutcome, SimEvent, SimResult
from .vclock import VirtualClock, run_virtual

__all__ = ["SIM_FLEET", "SimConfig", "simulate"]

#: The product's [fleet] defaults with the simulation's tick: decisions also run on every event, so a
#: coarser tick only delays time-based ones (reaping, cooldowns) by at most a tick, and keeps a simulated
#: month cheap. Long polls are the proxy-safe maximum.
SIM_FLEET = FleetConfig(ladder=tuple(g.gpu_type for g in DEFAULT_LADDER), tick_s=10.0, poll_wait_s=90.0)


class SimConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The simulated world; ``fleet`` is the product's own ``[fleet]`` table, used as is."""

    seed: int = 0
    fleet: FleetConfig = SIM_FLEET
    market: tuple[SimGpu, ...] = DEFAULT_LADDER  # GPU types the simulated provider rents (price, stock)
    #: rung label -> base model -> speed (work per second, reference GPU = 1); default: the GPU's own speed
    speeds: dict[str, dict[str, float]] = {}
    provision_median_s: float = 120.0  # request -> agent answering (~2 min in the seed)
    provision_sigma: float = 0.25
    bootstrap_fail_prob: float = 0.02  # a pod comes up broken: lost, terminated, never given work
    pod_mttf_s: float | None = 72 * 3600.0  # mean lifetime of a pod (None: pods never die)
    budget_usd: float | None = None  # the run's cap (None: no cap)
    horizon_s: float = 30 * 86400.0  # safety stop for runs that cannot finish (e.g. every rung gone)

    def __post_init__(self) -> None:
        if not self.market:
            raise ValueError("SimConfig.market must name at least one GPU type")
        known = {g.gpu_type for g in self.market}
        missing = [r for r in self.fleet.all_rungs if parse_rung(r)[0] not in known]
        if missing:
            raise ValueError(f"SimConfig: the fleet ladder names GPU types the market lacks: {missing}")
        if not 0 <= self.bootstrap_fail_prob < 1:
            raise ValueError("SimConfig.bootstrap_fail_prob must be in [0, 1)")
        if self.pod_mttf_s is not None and self.pod_mttf_s <= 0:
            raise ValueError("SimConfig.pod_mttf_s must be > 0 or None")
        if min(self.provision_median_s, self.provision_sigma, self.horizon_s) < 0:
            raise ValueError("SimConfig: latencies and the horizon must be >= 0")

    def speed(self, gpu_type: str, gpu_count: int, model: str) -> float:
        label = gpu_type if gpu_count == 1 else f"{gpu_count}x {gpu_type}"
        table = self.speeds.get(label, {})
        if model in table:
            return table[model]
        if "" in table:
            return table[""]
        return next(g.speed for g in self.market if g.gpu_type == gpu_type)


class _MemoryBlobs(BlobStore):
    """Bundles in memory: no thread hops (the virtual clock must never wait on a thread)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        import hashlib

        digest = hashlib.sha256(data).hexdigest()
        self._data[digest] = data
        return digest

    def get(self, digest: str) -> bytes:
        return self._data[digest]

    async def aput(self, data: bytes) -> str:
        return self.put(data)

    async def aget(self, digest: str) -> bytes:
        return self.get(digest)


def _prices(market: Sequence[SimGpu]) -> PriceTable:
    import datetime as dt

    gpus = {g.gpu_type: GpuPrice(usd_per_hour=g.usd_per_hour) for g in market}
    return PriceTable(version=1, taken=dt.date(2026, 11, 30), models={}, gpus=gpus)


def _spec(gpu_type: str, pod_id: str, token: str) -> PodSpec:
    return PodSpec(gpu_type=gpu_type, image="simulated", env={"AIT_POD_TOKEN": token})


_TRACE_KINDS = {
    "pod.requested",
    "pod.created",
    "pod.ready",
    "pod.provision_failed",
    "pod.lost",
    "pod.terminating",
    "pod.terminated",
    "job.queued",
    "job.assigned",
    "job.started",
    "job.succeeded",
    "job.failed",
    "job.requeued",
    "cost.refused",
}


class _Run:
    def __init__(self, jobs: Sequence[SimJob], config: SimConfig, root: Path) -> None:
        if len({j.job_id for j in jobs}) != len(jobs):
            raise ValueError("simulate: job ids must be unique")
        self.jobs = list(jobs)
        self.cfg = config
        self.root = root
        self.finished_at = 0.0

    async def main(self, clock: VirtualClock) -> tuple[list[Recorded], SimProvider, SimPodAgents, float]:
        cfg = self.cfg
        provider = SimProvider(
            clock=clock.elapsed,
            ladder=cfg.market,
            seed=cfg.seed,
            provision_median_s=cfg.provision_median_s,
            provision_sigma=cfg.provision_sigma,
            pod_mttf_s=cfg.pod_mttf_s,
            bootstrap_fail_prob=cfg.bootstrap_fail_prob,
        )
        agents = SimPodAgents(provider, {j.job_id: (j.work_s, j.model) for j in self.jobs}, cfg.speed)
        blobs = _MemoryBlobs()
        bundle = blobs.put(b"simulated bundle")
        projections: list[Any] = [QueueProjection(), FleetProjection(), BudgetProjection()]
        async with Runtime(self.root, projections, run_id="sim", clock=clock, durability="none") as rt:
            if cfg.budget_usd is not None:
                await rt.emit(BudgetSet(run_usd=cfg.budget_usd))
            ports = Ports(
                provider=provider,
                agent=agents,
                gate=BudgetGate.for_runtime(rt, _prices(cfg.market)),
                blobs=blobs,
                tokens=lambda pod_id: f"sim-token-{pod_id}",
                spec_for=_spec,
            )
            dispatcher = Dispatcher(rt, ports, cfg.fleet, clock=clock)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._feed, rt, bundle, dispatcher)
                with anyio.move_on_after(cfg.horizon_s):
                    await dispatcher.run()
                tg.cancel_scope.cancel()
            records = _read(rt)
        return records, provider, agents, clock.elapsed()

    async def _feed(self, rt: Runtime, bundle: str, dispatcher: Dispatcher) -> None:
        """Queue each job at its arrival time; once all are in, let the dispatcher finish when drained."""
        for job in sorted(self.jobs, key=lambda j: j.arrival_s):
            delay = job.arrival_s - anyio.current_time()
            if delay > 0:
                await anyio.sleep(delay)
            await rt.emit(
                JobQueued(
                    job_id=job.job_id,
                    episode_id=f"e-{job.job_id}",
                    family="simulated",
                    base_model=job.model,
                    bundle=bundle,
                    estimate_s=job.estimate_s,
                )
            )
        # Every job is in: from here the dispatcher ends once the queue is drained (reaping the pool), or
        # when the budget stops it, as `ait worker --once` does. Before that an empty queue between
        # batches is only a pause, and the idle TTL decides what stays warm.
        dispatcher.once = True


def _read(rt: Runtime) -> list[Recorded]:
    from engine.log import read_log

    return read_log(rt.directory / "events.jsonl").records


def _result(
    jobs: Sequence[SimJob],
    cfg: SimConfig,
    records: list[Recorded],
    provider: SimProvider,
    agents: SimPodAgents,
    end: float,
) -> SimResult:
    t0 = records[0].ts if records else 0.0
    trace: list[SimEvent] = []
    counts = {"stock_out": 0, "bootstrap": 0, "lost": 0, "requeued": 0, "refused": 0}
    outcomes: dict[str, JobOutcome] = {}
    attempts: dict[str, int] = {}
    pod_gpu: dict[str, str] = {}
    for rec in records:
        e: Any = rec.event
        kind = e.type
        if kind not in _TRACE_KINDS:
            continue
        pod = getattr(e, "pod_id", "")
        if kind == "pod.requested":
            pod_gpu[pod] = e.gpu_type if e.gpu_count == 1 else f"{e.gpu_count}x {e.gpu_type}"
        if kind == "pod.provision_failed":
            counts["stock_out" if e.kind == "stock_out" else "bootstrap"] += e.kind in ("stock_out", "bootstrap")
        elif kind == "pod.lost":
            counts["lost"] += 1
        elif kind == "job.requeued":
            counts["requeued"] += 1
        elif kind == "cost.refused":
            counts["refused"] += 1
        elif kind == "job.assigned":
            attempts[e.job_id] = e.attempt
        job = getattr(e, "job_id", "")
        if kind == "cost.refused":
            pod = pod_of_ref(e.ref) or ""
        trace.append(
            SimEvent(
                t=rec.ts - t0,
                kind=kind,
                pod=pod,
                job=job,
                gpu=pod_gpu.get(pod, "") if kind != "pod.provision_failed" else e.gpu_type,
                usd=e.requested_usd if kind == "cost.refused" else 0.0,
                detail=_detail(e),
            )
        )
        if kind in ("job.succeeded", "job.failed"):
            outcomes[job] = JobOutcome(
                status="succeeded" if kind == "job.succeeded" else "failed",
                attempts=attempts.get(job, 0),
                finished_s=rec.ts - t0,
                gpu=pod_gpu.get(pod, ""),
            )
    for j in jobs:
        outcomes.setdefault(j.job_id, JobOutcome(status="unfinished", attempts=attempts.get(j.job_id, 0)))
    by_gpu: dict[str, GpuUsage] = {}
    billed = cost = 0.0
    for pod in provider.pods():
        label = pod.gpu.gpu_type if pod.gpu_count == 1 else f"{pod.gpu_count}x {pod.gpu.gpu_type}"
        ended = provider.ended_s(pod)
        seconds = max(0.0, (ended if ended is not None else end) - pod.created_s)
        usage = by_gpu.setdefault(label, GpuUsage())
        usage.pods += 1
        usage.pod_hours += seconds / 3600
        usage.cost_usd += pod.gpu.usd_per_hour * pod.gpu_count * seconds / 3600
        billed += seconds
        cost += pod.gpu.usd_per_hour * pod.gpu_count * seconds / 3600
    busy = lost = 0.0
    for run in agents.runs:
        pod = provider.pod_at(f"sim://{run.provider_id}")
        assert pod is not None
        stop = min(x for x in (run.ends_s, run.cut_s, pod.terminated_s, end) if x is not None)
        busy += max(0.0, stop - run.started_s)
        by_gpu[label_of(pod.gpu.gpu_type, pod.gpu_count)].busy_hours += max(0.0, stop - run.started_s) / 3600
        if run.cut_s is not None and run.cut_s < run.ends_s:
            lost += max(0.0, run.cut_s - run.started_s)
    for gpu, n in _stockouts(records).items():
        by_gpu.setdefault(gpu, GpuUsage()).stockouts = n
    succeeded = sum(1 for o in outcomes.values() if o.status == "succeeded")
    failed = sum(1 for o in outcomes.values() if o.status == "failed")
    finished = [o.finished_s for o in outcomes.values() if o.finished_s is not None]
    makespan = max(finished, default=0.0)
    models = {j.model for j in jobs}
    # the fastest pod any job could get: a valid (if loose) bound when speeds differ by GPU and model
    fastest = max((cfg.speed(*parse_rung(r), m) for r in cfg.fleet.all_rungs for m in models), default=1.0)
    bound = lower_bound_s(jobs, cfg.fleet.max_pods, fastest)
    return SimResult(
        seed=cfg.seed,
        policy=cfg.fleet.order,
        max_pods=cfg.fleet.max_pods,
        jobs=len(jobs),
        succeeded=succeeded,
        failed=failed,
        unfinished=len(jobs) - succeeded - failed,
        makespan_s=makespan,
        lower_bound_s=bound,
        makespan_ratio=makespan / bound if bound > 0 else math.nan,
        total_work_s=sum(j.work_s for j in jobs),
        longest_job_s=max((j.work_s for j in jobs), default=0.0),
        billed_pod_s=billed,
        busy_pod_s=busy,
        lost_work_s=lost,
        idle_fraction=1.0 - busy / billed if billed > 0 else 0.0,
        cost_usd=cost,
        cost_per_job_usd=cost / succeeded if succeeded else math.nan,
        pods_launched=len(provider.pods()),
        bootstrap_failures=counts["bootstrap"],
        pod_deaths=counts["lost"],
        job_retries=counts["requeued"],
        stockouts=counts["stock_out"],
        budget_refusals=counts["refused"],
        by_gpu=dict(sorted(by_gpu.items())),
        outcomes=outcomes,
        trace=trace,
        wall_clock_h=end / 3600,
    )


def _detail(e: Any) -> str:
    """The one word a test or a reader wants from each traced event."""
    kind = e.type
    if kind == "pod.provision_failed":
        return str(e.kind)
    if kind in ("pod.terminating", "pod.terminated", "pod.lost", "job.failed", "job.requeued"):
        return str(e.reason)
    if kind == "pod.requested":
        return f"rung {e.rung}"
    if kind == "job.assigned":
        return f"attempt {e.attempt}"
    if kind == "cost.refused":
        return str(e.message)
    return ""


def label_of(gpu_type: str, gpu_count: int) -> str:
    return gpu_type if gpu_count == 1 else f"{gpu_count}x {gpu_type}"


def _stockouts(records: list[Recorded]) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for rec in records:
        e: Any = rec.event
        if e.type == "pod.provision_failed" and e.kind == "stock_out":
            out[e.gpu_type] = out.get(e.gpu_type, 0) + 1
    return out


def simulate(jobs: Sequence[SimJob], config: SimConfig | None = None) -> SimResult:
    """Run the real dispatcher over ``jobs`` on virtual time and report. SIMULATED: nothing real is touched."""
    cfg = config or SimConfig()
    # The dispatcher logs every decision; at simulation scale that is noise (and most of the CPU time). The
    # process-wide config is restored after: a caller's warnings (a torn log tail, say) must still be seen.
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    try:
        with tempfile.TemporaryDirectory(prefix="ait-fleet-sim-") as tmp:
            run = _Run(jobs, cfg, Path(tmp) / "sim")
            records, provider, agents, end = run_virtual(run.main)
            return _result(jobs, cfg, records, provider, agents, end)
    finally:
        structlog.configure(**saved)
