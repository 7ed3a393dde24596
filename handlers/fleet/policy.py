"""The dispatcher's decisions as pure functions of the queue, the fleet, the config and the time.

Nothing here awaits or emits: :mod:`handlers.fleet.dispatcher` calls these and emits what they return with no
``await`` in between, which makes each decision atomic (docs/architecture.md, "Atomic decisions").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from events import JobAssigned, JobFailed, JobRequeued
from handlers.fleet.projection import AVAILABLE, BOOTING, LIVE, FleetState, PodEntry, available_pods
from handlers.fleet.queue import ACTIVE, WAITING, JobEntry, QueueState, waiting_jobs

__all__ = [
    "FATAL_PROVISION_KINDS",
    "IDLE_POLICIES",
    "JOB_ORDERS",
    "SEED_LADDER",
    "FleetConfig",
    "assignment",
    "attempt_lost",
    "choose_rung",
    "fits",
    "gpu_seconds_usd",
    "job_order",
    "launch_target",
    "owed_usd",
    "parse_rung",
    "pods_to_request",
    "reap_reason",
    "rung_label",
    "rung_rank",
    "surplus_pod",
    "upgrade_launch",
]

#: The seed's GPU preference ladder (Runpod ids): cheapest first, and where the arc mostly ran (A40, 4090).
SEED_LADDER: tuple[str, ...] = ("NVIDIA RTX A5000", "NVIDIA A40", "NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000")
#: Provision failures that no retry or other GPU type will fix: stop launching until a person acts.
FATAL_PROVISION_KINDS = frozenset({"auth", "quota", "invalid"})
#: Which waiting job goes first. Longest first (by the job's duration estimate, else its time budget) keeps a
#: drain's makespan near its lower bound: long jobs start early and the queue ends on short ones
#: (benchmarks/fleet_sim.py measures both on this dispatcher). Oldest first is plain queue order.
JOB_ORDERS = ("longest_first", "oldest_first")
#: What happens to a pod with no job: wait ``idle_ttl_s`` ("ttl"), or the batch-aware policy
#: (:mod:`handlers.fleet.batch_policy`).
IDLE_POLICIES = ("ttl", "batch")
_COUNT_PREFIX = re.compile(r"^([1-9][0-9]?)x (.+)$")


def parse_rung(rung: str) -> tuple[str, int]:
    """``"2x NVIDIA RTX A5000"`` -> ``("NVIDIA RTX A5000", 2)``; a bare GPU type is one GPU."""
    m = _COUNT_PREFIX.match(rung)
    return (m.group(2), int(m.group(1))) if m else (rung, 1)


def rung_label(gpu_type: str, gpu_count: int) -> str:
    """The ladder spelling of a pod's GPUs (the inverse of :func:`parse_rung`)."""
    return gpu_type if gpu_count == 1 else f"{gpu_count}x {gpu_type}"


class FleetConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``[fleet]`` table of a run config (all durations in seconds)."""

    max_pods: int = 16
    # Rungs in order of preference: a GPU type, or "<n>x <GPU type>" for an n-GPU pod (priced per GPU).
    ladder: tuple[str, ...] = SEED_LADDER
    # base model -> its own ladder (the rungs that fit it, cheapest per job first). A job of a listed model
    # runs only on a pod from its ladder; any other job uses ``ladder`` and takes any pod.
    ladders: dict[str, tuple[str, ...]] = {}
    order: str = "longest_first"  # which waiting job goes first: one of JOB_ORDERS
    # Pods that may run beyond max_pods for a while to move work onto a cheaper rung: while work waits and a
    # rung cheaper than the priciest live pod is not in its stock-out cooldown, launch there; the priciest
    # pod is retired when it next comes free. 0: never exceed max_pods.
    upgrade_pods: int = 0
    idle_ttl_s: float = 600.0  # an idle pod older than this is terminated
    # "batch": a free pod no waiting job fits is terminated at once unless it is on one of the top
    # ``warm_rungs`` rungs of a ladder (those keep ``idle_ttl_s``); see handlers/fleet/batch_policy.py.
    idle_policy: str = "ttl"
    warm_rungs: int = 1
    # A launch below the top rung of the job's ladder waits this long (from the oldest waiting job's
    # arrival) while a live pod on a better rung of that ladder will take the work. 0: never waits.
    fallback_wait_s: float = 0.0
    max_attempts: int = 3  # attempts per job when pods die under it; then the job fails (pod_lost)
    stockout_cooldown_s: float = 300.0  # a rung that was out of stock is skipped this long
    error_backoff_s: float = 30.0  # after any other provision failure, wait this long before the next launch
    ready_timeout_s: float = 1200.0  # a pod whose agent is not healthy by then failed its bootstrap
    reserve_s: float = 3600.0  # GPU time reserved per pod at a time (the budget's chunk)
    tick_s: float = 1.0  # the dispatcher's wake-up period when no event arrives
    health_every_s: float = 30.0  # health checks of idle pods
    agent_grace_s: float = 60.0  # an agent unreachable this long is lost even if the provider says running
    poll_wait_s: float = 20.0  # long-poll of a job's progress stream (< the proxy's 100 s timeout)
    job_grace_s: float = 300.0  # controller-side deadline beyond a job's own time budget
    pins: dict[str, str] = {}  # exact revisions every pod is bootstrapped with (prime-rl, verifiers, ...)

    def __post_init__(self) -> None:
        if self.max_pods < 1:
            raise ValueError(f"fleet.max_pods must be >= 1, got {self.max_pods}")
        for where, ladder in (("ladder", self.ladder), *((f"ladders.{m}", lad) for m, lad in self.ladders.items())):
            if not ladder:
                raise ValueError(f"fleet.{where} must name at least one GPU type")
            if len(set(ladder)) != len(ladder):
                raise ValueError(f"fleet.{where} lists a GPU type twice: {list(ladder)}")
        if self.order not in JOB_ORDERS:
            raise ValueError(f"fleet.order must be one of {list(JOB_ORDERS)}, got {self.order!r}")
        if self.idle_policy not in IDLE_POLICIES:
            raise ValueError(f"fleet.idle_policy must be one of {list(IDLE_POLICIES)}, got {self.idle_policy!r}")
        if self.warm_rungs < 0:
            raise ValueError(f"fleet.warm_rungs must be >= 0, got {self.warm_rungs}")
        if self.upgrade_pods < 0:
            raise ValueError(f"fleet.upgrade_pods must be >= 0, got {self.upgrade_pods}")
        if self.max_attempts < 1:
            raise ValueError(f"fleet.max_attempts must be >= 1, got {self.max_attempts}")
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if name.endswith("_s") and (not isinstance(value, int | float) or math.isnan(value) or value < 0):
                raise ValueError(f"fleet.{name} must be a number of seconds >= 0, got {value!r}")
        if self.tick_s <= 0:
            raise ValueError(f"fleet.tick_s must be > 0, got {self.tick_s}")

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, source: str = "run config") -> FleetConfig:
        """Build from a parsed ``[fleet]`` table; errors name ``source`` and the key."""
        unknown = sorted(set(table) - set(cls.__struct_fields__))
        if unknown:
            raise ValueError(f"{source}: [fleet] has unknown key(s) {unknown}; known: {sorted(cls.__struct_fields__)}")
        try:
            return msgspec.convert(dict(table), cls)  # strict: a quoted "12" is no number
        except (msgspec.ValidationError, ValueError) as exc:
            raise ValueError(f"{source}: [fleet]: {exc}") from None

    def rungs_for(self, base_model: str) -> tuple[str, ...]:
        return self.ladders.get(base_model, self.ladder)

    @property
    def all_rungs(self) -> tuple[str, ...]:
        """Every rung of every ladder, once (what the price table must know)."""
        return tuple(dict.fromkeys([*self.ladder, *(r for lad in self.ladders.values() for r in lad)]))


def pods_to_request(*, waiting: int, available: int, booting: int, live: int, max_pods: int) -> int:
    """New pods to launch now: enough for the jobs that no available or booting pod will take, within the cap.

    ``live`` counts every pod holding a place under the cap (booting, ready, busy, idle).
    """
    return max(0, min(waiting - available - booting, max_pods - live))


def choose_rung(fleet: FleetState, config: FleetConfig, now: float, base_model: str = "") -> tuple[int, str] | None:
    """The most preferred rung for ``base_model`` not out of stock within the cooldown, or None when every
    rung is out. Returns (position, rung label)."""
    for rung, label in enumerate(config.rungs_for(base_model)):
        last = fleet.stockouts.get(parse_rung(label)[0])  # stock-outs are recorded per GPU type, whatever the count
        if last is None or now - last >= config.stockout_cooldown_s:
            return rung, label
    return None


def fits(pod: PodEntry, job: JobEntry, config: FleetConfig) -> bool:
    """May ``job`` run on ``pod``? Only a model with its own ladder is confined to that ladder's rungs."""
    rungs = config.ladders.get(job.base_model)
    return rungs is None or rung_label(pod.gpu_type, pod.gpu_count) in rungs


def job_order(config: FleetConfig) -> Callable[[JobEntry], tuple[float, int, str]]:
    """Sort key for waiting jobs under ``config.order`` (ties: queue order, then id)."""
    if config.order == "oldest_first":
        return lambda j: (0.0, j.order, j.job_id)
    return lambda j: (-(j.estimate_s or j.time_budget_s), j.order, j.job_id)


def _ordered(queue: QueueState, config: FleetConfig) -> list[JobEntry]:
    return sorted([j for j in queue.jobs.values() if j.status in WAITING], key=job_order(config))


def launch_target(queue: QueueState, fleet: FleetState, config: FleetConfig) -> JobEntry | None:
    """The first waiting job (in serving order) that no available or booting pod will take, or None.

    Each available or booting pod covers one waiting job it fits, matched greedily in serving order; the
    launch that follows is for the first job left over, on that job's ladder.
    """
    pods = [p for p in fleet.pods.values() if (p.status in AVAILABLE and not p.draining) or p.status in BOOTING]
    for job in _ordered(queue, config):
        pod = next((p for p in pods if fits(p, job, config)), None)
        if pod is None:
            return job
        pods.remove(pod)
    return None


def rung_rank(pod: PodEntry, ladder: tuple[str, ...]) -> int:
    """The pod's position on ``ladder`` (lower: preferred, i.e. cheaper per job); off the ladder: last."""
    label = rung_label(pod.gpu_type, pod.gpu_count)
    return ladder.index(label) if label in ladder else len(ladder)


def _first_waiting(queue: QueueState, config: FleetConfig) -> JobEntry | None:
    return min((j for j in queue.jobs.values() if j.status in WAITING), key=job_order(config), default=None)


def upgrade_launch(queue: QueueState, fleet: FleetState, config: FleetConfig, now: float) -> tuple[int, str] | None:
    """(0, top rung) for a launch that moves work onto the top rung of the next job's ladder, or None.

    Only with ``upgrade_pods``, while work waits (the new pod has a job to take), and with fewer than
    ``max_pods + upgrade_pods`` live. The next waiting job's ladder ranks the rungs.
    """
    if config.upgrade_pods < 1:
        return None
    live = [p for p in fleet.pods.values() if p.status in LIVE]
    if not live or len(live) >= config.max_pods + config.upgrade_pods:
        return None
    job = _first_waiting(queue, config)
    if job is None:
        return None
    choice = choose_rung(fleet, config, now, job.base_model)
    ladder = config.rungs_for(job.base_model)
    # Only onto the ladder's top rung, and only from two or more rungs down: neighbouring rungs cost about the
    # same (a move would cost a boot for little), and models whose ladders order the top two differently
    # would otherwise trade pods back and forth.
    if choice is None or choice[0] != 0 or max(rung_rank(p, ladder) for p in live) < 2:
        return None
    return choice


def surplus_pod(queue: QueueState, fleet: FleetState, config: FleetConfig) -> PodEntry | None:
    """With more than ``max_pods`` live (after an upgrade), an available pod on the priciest live rung, to retire."""
    live = [p for p in fleet.pods.values() if p.status in LIVE]
    if len(live) <= config.max_pods:
        return None
    job = _first_waiting(queue, config)
    ladder = config.rungs_for(job.base_model if job is not None else "")
    worst = max(rung_rank(p, ladder) for p in live)
    return next((p for p in available_pods(fleet) if rung_rank(p, ladder) == worst), None)


def launch_count(queue: QueueState, fleet: FleetState, config: FleetConfig) -> int:
    pods = fleet.pods.values()
    return pods_to_request(
        waiting=len(waiting_jobs(queue)),
        available=sum(1 for p in pods if p.status in AVAILABLE and not p.draining),
        booting=sum(1 for p in pods if p.status in BOOTING),
        live=sum(1 for p in pods if p.status in LIVE),
        max_pods=config.max_pods,
    )


def assignment(queue: QueueState, fleet: FleetState, config: FleetConfig | None = None) -> JobAssigned | None:
    """The first waiting job (``config.order``: longest first by default) that an available pod fits, onto
    the fitting pod highest on the job's ladder (cheapest per job), then idle longest; or None."""
    config = config or FleetConfig()
    pods = available_pods(fleet)
    if not pods:
        return None
    if not config.ladders:  # every pod fits every job: the first in order, without sorting the whole queue
        first = _first_waiting(queue, config)
        if first is None:
            return None
        return JobAssigned(
            job_id=first.job_id, pod_id=_cheapest(pods, first, config).pod_id, attempt=first.attempts + 1
        )
    for job in _ordered(queue, config):
        fitting = [p for p in pods if fits(p, job, config)]
        if fitting:
            return JobAssigned(
                job_id=job.job_id, pod_id=_cheapest(fitting, job, config).pod_id, attempt=job.attempts + 1
            )
    return None


def _cheapest(pods: list[PodEntry], job: JobEntry, config: FleetConfig) -> PodEntry:
    """The pod highest on the job's ladder (cheapest per job), then the one idle longest (``pods``' order)."""
    ladder = config.rungs_for(job.base_model)
    return min(pods, key=lambda p: rung_rank(p, ladder))


def attempt_lost(job: JobEntry, key: str, reason: str, config: FleetConfig) -> JobRequeued | JobFailed | None:
    """The outcome of an attempt whose pod died: requeue it, or fail the job once its attempts are spent.

    None when ``key`` is no longer the job's open attempt (another path already ended it).
    """
    if job.status not in ACTIVE or job.key != key:
        return None
    if job.attempts >= config.max_attempts:
        return JobFailed(
            key=key,
            job_id=job.job_id,
            reason="pod_lost",
            detail=f"{reason}; gave up after {job.attempts} attempt(s), each on a pod that died",
            pod_id=job.pod_id,
            attempt=job.attempts,
        )
    return JobRequeued(key=key, job_id=job.job_id, reason=reason, attempt=job.attempts, pod_id=job.pod_id)


def reap_reason(pod: PodEntry, config: FleetConfig, now: float, *, drained: bool) -> str | None:
    """Why an available pod should be terminated now, or None to keep it."""
    if pod.status not in AVAILABLE:
        return None
    if drained:
        return "drained"
    if pod.draining:
        return "budget"
    if now - pod.idle_since >= config.idle_ttl_s:
        return "idle_ttl"
    return None


def owed_usd(pod: PodEntry, usd_per_hour: float, until: float) -> tuple[float, float]:
    """(USD not yet settled for the pod's GPU time up to ``until``, seconds billed in all). Never negative."""
    if not pod.created_ts:
        return 0.0, 0.0
    seconds = max(0.0, until - pod.created_ts)
    return max(0.0, usd_per_hour * seconds / 3600.0 - pod.charged_usd), seconds


def gpu_seconds_usd(pod: PodEntry, wall_s: float) -> tuple[float, float]:
    """(GPU-seconds, USD) of ``wall_s`` seconds on ``pod``: a job's cost priced per GPU-second.

    A 2-GPU pod's job holds both GPUs (vLLM on one, the trainer on the other), so it uses twice the
    GPU-seconds of its wall time, each at the pod's rate per GPU (the pod's hourly price / its GPUs).
    """
    gpus = max(1, pod.gpu_count)
    gpu_s = max(0.0, wall_s) * gpus
    return gpu_s, gpu_s * (pod.usd_per_hour / gpus) / 3600.0
