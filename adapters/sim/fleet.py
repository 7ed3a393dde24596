"""Discrete-event simulation of a GPU pod fleet draining a job queue (every output is SIMULATED).

Modelled: provision latency (lognormal), stock-outs per GPU type with a ladder walk and a backoff
when every rung is out, bootstrap failures (pod discarded), pod deaths (exponential lifetimes) with
bounded job retries, per-type $/hour billed from creation to termination, a warm pool capped at
``max_pods`` whose idle pods are reaped after ``idle_ttl_s``, and a budget gate that reserves pod
time before each launch and job time before each start. Not modelled: network/upload time, jobs
that crash on their own, partial-hour billing rules.

Seeded and deterministic: each source of randomness has its own stream derived from the seed, so a
run is a pure function of (jobs, config).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from typing import Literal

import msgspec

from .catalog import DEFAULT_LADDER, SimGpu, StockProcess
from .durations import SimJob
from .metrics import lower_bound_s
from .policy import Policy, job_key, pod_key, pods_to_request
from .results import GpuUsage, JobOutcome, SimEvent, SimResult

__all__ = ["FleetConfig", "simulate"]


class FleetConfig(msgspec.Struct, frozen=True, kw_only=True):
    seed: int = 0
    max_pods: int = 16
    ladder: tuple[SimGpu, ...] = DEFAULT_LADDER
    policy: Policy = Policy.LPT
    provision_median_s: float = 120.0  # request -> pod serving (~2 min in the seed)
    provision_sigma: float = 0.25
    stockout_latency_s: float = 2.0  # time for a refused create to come back
    ladder_backoff_s: float = 60.0  # wait after every rung was out of stock
    bootstrap_fail_prob: float = 0.02  # pod comes up broken: terminated, never reused
    pod_mttf_s: float | None = 72 * 3600.0  # mean lifetime of a ready pod (None: pods never die)
    idle_ttl_s: float = 300.0
    max_attempts: int = 3  # per job; a job whose pod died this many times fails
    budget_usd: float | None = None
    reservation_s: float = 3600.0  # pod time reserved against the budget before a launch
    horizon_s: float = 30 * 86400.0  # safety stop for runs that cannot finish (e.g. all stock gone)

    def __post_init__(self) -> None:
        if self.max_pods < 1 or self.max_attempts < 1:
            raise ValueError("FleetConfig: max_pods and max_attempts must be >= 1")
        if not self.ladder:
            raise ValueError("FleetConfig.ladder must name at least one GPU type")
        if not 0 <= self.bootstrap_fail_prob < 1:
            raise ValueError("FleetConfig.bootstrap_fail_prob must be in [0, 1)")
        if self.pod_mttf_s is not None and self.pod_mttf_s <= 0:
            raise ValueError("FleetConfig.pod_mttf_s must be > 0 or None")
        if min(self.provision_median_s, self.stockout_latency_s, self.idle_ttl_s, self.reservation_s) < 0:
            raise ValueError("FleetConfig: latencies, TTL and reservation must be >= 0")
        if self.ladder_backoff_s + self.stockout_latency_s <= 0:
            raise ValueError("FleetConfig: ladder_backoff_s + stockout_latency_s must be > 0 (or the walk spins)")


class _Pod(msgspec.Struct, kw_only=True):
    index: int
    gpu: SimGpu
    created_s: float
    state: Literal["booting", "idle", "busy", "gone"] = "booting"
    job: int | None = None
    started_s: float = 0.0
    est_end_s: float = 0.0
    token: int = 0  # bumped on every state change; stale scheduled events carry an old one
    idle_since: float = 0.0
    busy_s: float = 0.0
    ended_s: float | None = None

    @property
    def pod_id(self) -> str:
        return f"sim-pod{self.index:04d}"


class _Job(msgspec.Struct, kw_only=True):
    status: Literal["waiting", "queued", "running", "succeeded", "failed"] = "waiting"
    attempts: int = 0
    finished_s: float | None = None
    gpu: str = ""


class _Fleet:
    def __init__(self, jobs: Sequence[SimJob], config: FleetConfig) -> None:
        self.jobs = list(jobs)
        if len({j.job_id for j in self.jobs}) != len(self.jobs):
            raise ValueError("simulate: job ids must be unique")
        self.cfg = config
        seed = config.seed
        self.rng_latency = random.Random(f"{seed}:latency")
        self.rng_boot = random.Random(f"{seed}:bootstrap")
        self.rng_death = random.Random(f"{seed}:deaths")
        self.stock = [StockProcess(g, random.Random(f"{seed}:stock:{g.gpu_type}")) for g in config.ladder]
        self.now = 0.0
        self.events: list[tuple[float, int, str, tuple[int, ...]]] = []
        self.seq = 0
        self.queue: list[tuple[tuple[float, float, int], int]] = []
        self.state = [_Job() for _ in self.jobs]
        self.pods: list[_Pod] = []
        self.requests: set[int] = set()
        self.next_request = 0
        self.trace: list[SimEvent] = []
        self.counts = {"bootstrap": 0, "deaths": 0, "retries": 0, "stockouts": 0, "refusals": 0}
        self.stockouts_by_gpu = [0] * len(config.ladder)
        self.lost_work_s = 0.0

    # ---- plumbing -------------------------------------------------------------------------------

    def push(self, t: float, kind: str, *args: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, args))

    def log(
        self,
        kind: str,
        *,
        pod: _Pod | None = None,
        job: int | None = None,
        gpu: str = "",
        usd: float = 0.0,
        detail: str = "",
    ) -> None:
        self.trace.append(
            SimEvent(
                t=self.now,
                kind=kind,
                pod=pod.pod_id if pod else "",
                job=self.jobs[job].job_id if job is not None else "",
                gpu=pod.gpu.gpu_type if pod else gpu,
                usd=usd,
                detail=detail,
            )
        )

    def live(self) -> list[_Pod]:
        return [p for p in self.pods if p.state != "gone"]

    def spent_usd(self) -> float:
        return (
            sum(
                p.gpu.usd_per_hour * ((p.ended_s if p.ended_s is not None else self.now) - p.created_s)
                for p in self.pods
            )
            / 3600.0
        )

    def committed_usd(self) -> float:
        """Spend so far plus the estimated remainder of every running job (reserved before it started)."""
        running = sum(p.gpu.usd_per_hour * max(0.0, p.est_end_s - self.now) for p in self.pods if p.state == "busy")
        return self.spent_usd() + running / 3600.0

    def over_budget(self, extra_usd: float) -> tuple[bool, float]:
        if self.cfg.budget_usd is None:
            return False, 0.0
        committed = self.committed_usd() + extra_usd
        return committed > self.cfg.budget_usd + 1e-9, committed

    # ---- the loop -------------------------------------------------------------------------------

    def run(self) -> None:
        # One event per distinct arrival time, so a burst of jobs is queued before anything is decided.
        order = sorted(range(len(self.jobs)), key=lambda i: (self.jobs[i].arrival_s, i))
        start = 0
        for end in range(1, len(order) + 1):
            if end == len(order) or self.jobs[order[end]].arrival_s != self.jobs[order[start]].arrival_s:
                self.push(self.jobs[order[start]].arrival_s, "arrive", *order[start:end])
                start = end
        while self.events:
            t, _, kind, args = heapq.heappop(self.events)
            if t > self.cfg.horizon_s:
                self.now = self.cfg.horizon_s
                break
            self.now = t
            getattr(self, f"on_{kind}")(*args)
        for pod in self.live():  # pods outlive the loop only at the horizon: stop their meters there
            self.terminate(pod, "horizon")

    def on_arrive(self, *indices: int) -> None:
        for j in indices:
            self.enqueue(j)
        self.dispatch()
        self.provision()

    def enqueue(self, j: int) -> None:
        self.state[j].status = "queued"
        heapq.heappush(self.queue, (job_key(self.cfg.policy, self.jobs[j], j), j))

    # ---- provisioning ---------------------------------------------------------------------------

    def counts_now(self) -> tuple[int, int, int]:
        live = self.live()
        idle = sum(1 for p in live if p.state == "idle")
        booting = sum(1 for p in live if p.state == "booting")
        return len(live), idle, booting

    def provision(self) -> None:
        live, idle, booting = self.counts_now()
        n = pods_to_request(
            queued=len(self.queue),
            idle=idle,
            booting=booting,
            requesting=len(self.requests),
            live=live,
            max_pods=self.cfg.max_pods,
        )
        for _ in range(n):
            self.next_request += 1
            self.requests.add(self.next_request)
            self.push(self.now, "attempt", self.next_request, 0)

    def on_attempt(self, request: int, rung: int) -> None:
        _, idle, booting = self.counts_now()
        if idle + booting + len(self.requests) - 1 >= len(self.queue):
            self.requests.discard(request)  # the work it was for is covered (or done) already
            return
        gpu = self.cfg.ladder[rung]
        same_type = sum(1 for p in self.live() if p.gpu.gpu_type == gpu.gpu_type)
        at_capacity = gpu.capacity is not None and same_type >= gpu.capacity
        if at_capacity or self.stock[rung].out_of_stock(self.now):
            self.counts["stockouts"] += 1
            self.stockouts_by_gpu[rung] += 1
            self.log("pod.stock_out", gpu=gpu.gpu_type, detail=f"rung {rung}")
            if rung + 1 < len(self.cfg.ladder):
                self.push(self.now + self.cfg.stockout_latency_s, "attempt", request, rung + 1)
            else:
                delay = self.cfg.stockout_latency_s + self.cfg.ladder_backoff_s
                self.push(self.now + delay, "attempt", request, 0)
            return
        refused, committed = self.over_budget(gpu.usd_per_hour * self.cfg.reservation_s / 3600.0)
        if refused:
            self.requests.discard(request)
            self.counts["refusals"] += 1
            self.log("budget.refused", gpu=gpu.gpu_type, usd=committed, detail="no new pod")
            return
        self.requests.discard(request)
        pod = _Pod(index=len(self.pods) + 1, gpu=gpu, created_s=self.now)
        self.pods.append(pod)
        self.log("pod.created", pod=pod, usd=committed, detail=f"rung {rung}")
        latency = self.cfg.provision_median_s * math.exp(self.cfg.provision_sigma * self.rng_latency.gauss(0, 1))
        self.push(self.now + latency, "ready", pod.index - 1, pod.token)

    def on_ready(self, p: int, token: int) -> None:
        pod = self.pods[p]
        if pod.token != token:
            return
        if self.rng_boot.random() < self.cfg.bootstrap_fail_prob:
            self.counts["bootstrap"] += 1
            self.terminate(pod, "bootstrap_failed")
            self.provision()
            return
        self.log("pod.ready", pod=pod)
        if self.cfg.pod_mttf_s is not None:
            self.push(self.now + self.rng_death.expovariate(1 / self.cfg.pod_mttf_s), "death", p)
        self.become_idle(pod)
        self.dispatch()

    # ---- running jobs ---------------------------------------------------------------------------

    def become_idle(self, pod: _Pod) -> None:
        pod.state, pod.job, pod.idle_since = "idle", None, self.now
        pod.token += 1
        self.push(self.now + self.cfg.idle_ttl_s, "idle_check", pod.index - 1, pod.token)

    def dispatch(self) -> None:
        while self.queue:
            idle = [p for p in self.pods if p.state == "idle"]
            if not idle:
                return
            pod = min(idle, key=lambda p: pod_key(p.gpu.speed, p.idle_since, p.index))
            _, j = self.queue[0]
            job = self.jobs[j]
            refused, committed = self.over_budget(pod.gpu.usd_per_hour * job.estimate_s / pod.gpu.speed / 3600.0)
            if refused:
                self.counts["refusals"] += 1
                self.log("budget.refused", pod=pod, job=j, usd=committed, detail="job not started")
                self.terminate(pod, "budget")
                continue
            heapq.heappop(self.queue)
            st = self.state[j]
            st.status, st.gpu = "running", pod.gpu.gpu_type
            st.attempts += 1
            pod.state, pod.job, pod.started_s = "busy", j, self.now
            pod.est_end_s = self.now + job.estimate_s / pod.gpu.speed
            pod.token += 1
            self.log("job.started", pod=pod, job=j, detail=f"attempt {st.attempts}")
            self.push(self.now + job.work_s / pod.gpu.speed, "done", pod.index - 1, pod.token)

    def on_done(self, p: int, token: int) -> None:
        pod = self.pods[p]
        if pod.token != token or pod.job is None:
            return
        j = pod.job
        pod.busy_s += self.now - pod.started_s
        st = self.state[j]
        st.status, st.finished_s = "succeeded", self.now
        self.log("job.succeeded", pod=pod, job=j)
        self.become_idle(pod)
        self.dispatch()

    def on_death(self, p: int) -> None:
        pod = self.pods[p]
        if pod.state == "gone":
            return
        self.counts["deaths"] += 1
        j = pod.job
        if j is not None:
            pod.busy_s += self.now - pod.started_s
            self.lost_work_s += self.now - pod.started_s
        self.terminate(pod, "lost")
        if j is not None:
            st = self.state[j]
            if st.attempts >= self.cfg.max_attempts:
                st.status, st.finished_s = "failed", self.now
                self.log("job.failed", job=j, detail=f"pod_lost after {st.attempts} attempts")
            else:
                self.counts["retries"] += 1
                self.log("job.requeued", job=j, detail="pod_lost")
                self.enqueue(j)
        self.dispatch()
        self.provision()

    def on_idle_check(self, p: int, token: int) -> None:
        pod = self.pods[p]
        if pod.state == "idle" and pod.token == token:
            self.terminate(pod, "idle_ttl")

    def terminate(self, pod: _Pod, reason: str) -> None:
        pod.state, pod.ended_s = "gone", self.now
        pod.token += 1
        self.log("pod.lost" if reason == "lost" else "pod.terminated", pod=pod, detail=reason)

    # ---- results --------------------------------------------------------------------------------

    def result(self) -> SimResult:
        cfg = self.cfg
        outcomes = {}
        for job, st in zip(self.jobs, self.state, strict=True):
            status: Literal["succeeded", "failed", "unfinished"] = "unfinished"
            if st.status == "succeeded" or st.status == "failed":
                status = st.status
            outcomes[job.job_id] = JobOutcome(status=status, attempts=st.attempts, finished_s=st.finished_s, gpu=st.gpu)
        finished = [s.finished_s for s in self.state if s.finished_s is not None]
        succeeded = sum(1 for o in outcomes.values() if o.status == "succeeded")
        failed = sum(1 for o in outcomes.values() if o.status == "failed")
        by_gpu = {g.gpu_type: GpuUsage(stockouts=self.stockouts_by_gpu[i]) for i, g in enumerate(cfg.ladder)}
        billed = busy = 0.0
        for pod in self.pods:
            end = pod.ended_s if pod.ended_s is not None else self.now
            usage = by_gpu[pod.gpu.gpu_type]
            usage.pods += 1
            usage.pod_hours += (end - pod.created_s) / 3600.0
            usage.busy_hours += pod.busy_s / 3600.0
            usage.cost_usd += pod.gpu.usd_per_hour * (end - pod.created_s) / 3600.0
            billed += end - pod.created_s
            busy += pod.busy_s
        cost = sum(u.cost_usd for u in by_gpu.values())
        makespan = max(finished, default=0.0)
        bound = lower_bound_s(self.jobs, cfg.max_pods, max(g.speed for g in cfg.ladder))
        return SimResult(
            seed=cfg.seed,
            policy=cfg.policy.value,
            max_pods=cfg.max_pods,
            jobs=len(self.jobs),
            succeeded=succeeded,
            failed=failed,
            unfinished=len(self.jobs) - succeeded - failed,
            makespan_s=makespan,
            lower_bound_s=bound,
            makespan_ratio=makespan / bound if bound > 0 else math.nan,
            total_work_s=sum(j.work_s for j in self.jobs),
            longest_job_s=max((j.work_s for j in self.jobs), default=0.0),
            billed_pod_s=billed,
            busy_pod_s=busy,
            lost_work_s=self.lost_work_s,
            idle_fraction=1.0 - busy / billed if billed > 0 else 0.0,
            cost_usd=cost,
            cost_per_job_usd=cost / succeeded if succeeded else math.nan,
            pods_launched=len(self.pods),
            bootstrap_failures=self.counts["bootstrap"],
            pod_deaths=self.counts["deaths"],
            job_retries=self.counts["retries"],
            stockouts=self.counts["stockouts"],
            budget_refusals=self.counts["refusals"],
            by_gpu=by_gpu,
            outcomes=outcomes,
            trace=self.trace,
        )


def simulate(jobs: Sequence[SimJob], config: FleetConfig) -> SimResult:
    """Run the fleet over ``jobs`` and report. SIMULATED: no pod, GPU or provider is touched."""
    fleet = _Fleet(jobs, config)
    fleet.run()
    return fleet.result()
