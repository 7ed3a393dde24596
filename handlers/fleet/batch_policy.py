"""The batch-aware idle policy: which idle pods to keep between batches, and when to wait for a cheap pod.

An outer loop queues its inner jobs in batches. Between two batches every pod comes free; under the plain
``idle_ttl`` policy each one then idles for ``idle_ttl_s`` (billed) and is terminated unless the next batch
comes first, and during a batch the dispatcher launches pods on whatever rung is in stock, often a pricey
fallback, though a cheap pod already up would have taken the job a few minutes later. With
``[fleet] idle_policy = "batch"``:

- **the priciest go first**: an available pod that no waiting job fits is terminated at once, unless it is on
  one of the top ``warm_rungs`` rungs of a ladder that lists it (the cheapest per job, and on the seed's
  market the scarcest), which keep the idle TTL. A fallback rung is one that is usually in stock, so
  holding it idle buys nothing a relaunch would not;
- **patience before a fallback**: with ``fallback_wait_s``, a launch on a rung below the top of the job's
  ladder waits while a live pod on a better rung of that ladder will take the work, until the oldest
  waiting job has waited ``fallback_wait_s``.

Both are pure functions of the projections, the config and the time, like :mod:`handlers.fleet.policy`.
``benchmarks/fleet_sim.py`` (scenario 3) measures them on the real dispatcher.
"""

from __future__ import annotations

from collections.abc import Sequence

from handlers.fleet.policy import FleetConfig, fits, reap_reason, rung_rank
from handlers.fleet.projection import AVAILABLE, LIVE, FleetState, PodEntry
from handlers.fleet.queue import JobEntry, QueueState, waiting_jobs

__all__ = ["fallback_waits", "idle_reaps", "on_warm_rung"]


def on_warm_rung(pod: PodEntry, config: FleetConfig) -> bool:
    """Is the pod on one of the top ``warm_rungs`` rungs of any ladder that lists it?"""
    ladders = (config.ladder, *config.ladders.values())
    return any(rung_rank(pod, ladder) < min(config.warm_rungs, len(ladder)) for ladder in ladders)


def idle_reaps(
    queue: QueueState, fleet: FleetState, config: FleetConfig, now: float, *, drained: bool
) -> list[tuple[PodEntry, str]]:
    """The available pods to terminate now, with the reason for each.

    ``idle_policy = "ttl"``: :func:`~handlers.fleet.policy.reap_reason` alone (drained, draining, idle TTL).
    ``"batch"``: also every available pod that no waiting job fits and that is off the warm rungs
    (reason ``no_work``).
    """
    pods = sorted((p for p in fleet.pods.values() if p.status in AVAILABLE), key=lambda p: p.pod_id)
    waiting: Sequence[JobEntry] = waiting_jobs(queue) if config.idle_policy == "batch" else ()
    out: list[tuple[PodEntry, str]] = []
    for pod in pods:
        reason = reap_reason(pod, config, now, drained=drained)
        idle_off_warm = reason is None and config.idle_policy == "batch" and not on_warm_rung(pod, config)
        if idle_off_warm and not any(fits(pod, job, config) for job in waiting):
            reason = "no_work"
        if reason is not None:
            out.append((pod, reason))
    return out


def fallback_waits(
    rung: int, job: JobEntry, queue: QueueState, fleet: FleetState, config: FleetConfig, now: float
) -> bool:
    """Should the launch of ``job``'s ladder rung number ``rung`` wait (``fallback_wait_s``)?

    Yes while a live pod on a better rung of that ladder (booting, busy or free) will take the queue's work,
    and the oldest waiting job has waited less than ``fallback_wait_s``. The top rung never waits.
    """
    if config.fallback_wait_s <= 0 or rung == 0:
        return False
    ladder = config.rungs_for(job.base_model)
    better = any(
        p.status in LIVE and not p.draining and rung_rank(p, ladder) < rung and fits(p, job, config)
        for p in fleet.pods.values()
    )
    if not better:
        return False
    oldest = min((j.queued_ts for j in waiting_jobs(queue)), default=now)
    return now - oldest < config.fallback_wait_s
