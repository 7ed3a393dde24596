"""The dispatcher's decisions as pure functions of the queue, the fleet, the config and the time.

Nothing here awaits or emits: :mod:`handlers.fleet.dispatcher` calls these and emits what they return with no
``await`` in between, which makes each decision atomic (docs/architecture.md, "Atomic decisions").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from events import JobAssigned, JobFailed, JobRequeued
from handlers.fleet.projection import AVAILABLE, BOOTING, LIVE, FleetState, PodEntry, available_pods
from handlers.fleet.queue import ACTIVE, JobEntry, QueueState, waiting_jobs

__all__ = [
    "FATAL_PROVISION_KINDS",
    "SEED_LADDER",
    "FleetConfig",
    "assignment",
    "attempt_lost",
    "choose_rung",
    "owed_usd",
    "pods_to_request",
    "reap_reason",
]

#: The seed's GPU preference ladder (Runpod ids): cheapest first, and where the arc mostly ran (A40, 4090).
SEED_LADDER: tuple[str, ...] = ("NVIDIA RTX A5000", "NVIDIA A40", "NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000")
#: Provision failures that no retry or other GPU type will fix: stop launching until a person acts.
FATAL_PROVISION_KINDS = frozenset({"auth", "quota", "invalid"})


class FleetConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``[fleet]`` table of a run config (all durations in seconds)."""

    max_pods: int = 16
    ladder: tuple[str, ...] = SEED_LADDER  # GPU types in order of preference
    idle_ttl_s: float = 600.0  # an idle pod older than this is terminated
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
        if not self.ladder:
            raise ValueError("fleet.ladder must name at least one GPU type")
        if len(set(self.ladder)) != len(self.ladder):
            raise ValueError(f"fleet.ladder lists a GPU type twice: {list(self.ladder)}")
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


def pods_to_request(*, waiting: int, available: int, booting: int, live: int, max_pods: int) -> int:
    """New pods to launch now: enough for the jobs that no available or booting pod will take, within the cap.

    ``live`` counts every pod holding a place under the cap (booting, ready, busy, idle).
    """
    return max(0, min(waiting - available - booting, max_pods - live))


def choose_rung(fleet: FleetState, config: FleetConfig, now: float) -> tuple[int, str] | None:
    """The most preferred GPU type not out of stock within the cooldown, or None when every rung is out."""
    for rung, gpu in enumerate(config.ladder):
        last = fleet.stockouts.get(gpu)
        if last is None or now - last >= config.stockout_cooldown_s:
            return rung, gpu
    return None


def launch_count(queue: QueueState, fleet: FleetState, config: FleetConfig) -> int:
    pods = fleet.pods.values()
    return pods_to_request(
        waiting=len(waiting_jobs(queue)),
        available=sum(1 for p in pods if p.status in AVAILABLE and not p.draining),
        booting=sum(1 for p in pods if p.status in BOOTING),
        live=sum(1 for p in pods if p.status in LIVE),
        max_pods=config.max_pods,
    )


def assignment(queue: QueueState, fleet: FleetState) -> JobAssigned | None:
    """The oldest waiting job onto the pod idle longest, or None."""
    jobs, pods = waiting_jobs(queue), available_pods(fleet)
    if not jobs or not pods:
        return None
    job, pod = jobs[0], pods[0]
    return JobAssigned(job_id=job.job_id, pod_id=pod.pod_id, attempt=job.attempts + 1)


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
