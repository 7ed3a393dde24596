"""The batch-aware idle policy: the priciest free pods go at once, the cheapest keep the TTL, fallbacks wait."""

from __future__ import annotations

import pytest

from handlers.fleet.batch_policy import fallback_waits, idle_reaps, on_warm_rung
from handlers.fleet.policy import FleetConfig
from handlers.fleet.projection import FleetState, PodEntry
from handlers.fleet.queue import JobEntry, QueueState

LADDER = ("2x A5000", "A5000", "A6000", "4090")
BATCH = FleetConfig(ladder=LADDER, idle_ttl_s=600.0, idle_policy="batch", warm_rungs=1)


def pod(pod_id: str, gpu: str, status: str = "idle", idle_since: float = 100.0) -> PodEntry:
    count, gpu_type = (2, gpu[3:]) if gpu.startswith("2x ") else (1, gpu)
    return PodEntry(pod_id=pod_id, status=status, gpu_type=gpu_type, gpu_count=count, idle_since=idle_since)


def job(job_id: str, *, model: str = "m", status: str = "queued", queued_ts: float = 0.0) -> JobEntry:
    return JobEntry(
        job_id=job_id, episode_id="e", family="f", base_model=model, bundle="b", status=status, queued_ts=queued_ts
    )


def reaped(queue: QueueState, fleet: FleetState, config: FleetConfig, now: float = 110.0) -> dict[str, str]:
    return {p.pod_id: reason for p, reason in idle_reaps(queue, fleet, config, now, drained=False)}


FLEET = FleetState(
    pods={
        "p0": pod("p0", "2x A5000"),  # the top rung: kept warm
        "p1": pod("p1", "A6000"),
        "p2": pod("p2", "4090"),
        "p3": pod("p3", "4090", status="busy"),
        "p4": pod("p4", "A6000", status="provisioning"),
    }
)


def test_with_nothing_waiting_the_free_pods_off_the_warm_rungs_go_at_once() -> None:
    assert reaped(QueueState(), FLEET, BATCH) == {"p1": "no_work", "p2": "no_work"}
    # The plain policy (the default) keeps every free pod until its TTL, 600 s: nothing goes at 110 s.
    assert FleetConfig().idle_policy == "ttl"
    assert reaped(QueueState(), FLEET, FleetConfig(ladder=LADDER, idle_ttl_s=600.0)) == {}


def test_the_warm_rungs_keep_the_idle_ttl() -> None:
    assert reaped(QueueState(), FLEET, BATCH, now=699.0) == {"p1": "no_work", "p2": "no_work"}
    assert reaped(QueueState(), FLEET, BATCH, now=700.0) == {"p0": "idle_ttl", "p1": "idle_ttl", "p2": "idle_ttl"}
    two = FleetConfig(ladder=LADDER, idle_policy="batch", warm_rungs=2)
    assert reaped(QueueState(), FleetState(pods={"p": pod("p", "A5000")}), two) == {}
    none_warm = FleetConfig(ladder=LADDER, idle_policy="batch", warm_rungs=0)
    assert reaped(QueueState(), FLEET, none_warm) == {"p0": "no_work", "p1": "no_work", "p2": "no_work"}


def test_a_rung_is_warm_if_any_ladder_ranks_it_near_the_top() -> None:
    cfg = FleetConfig(ladder=LADDER, ladders={"small": ("A5000", "2x A5000")}, idle_policy="batch", warm_rungs=1)
    assert on_warm_rung(pod("a", "A5000"), cfg)  # second on the default ladder, first on the small model's
    assert on_warm_rung(pod("b", "2x A5000"), cfg) and not on_warm_rung(pod("c", "A6000"), cfg)
    assert not on_warm_rung(pod("d", "H100"), cfg)  # on no ladder at all


def test_a_free_pod_that_a_waiting_job_fits_is_kept() -> None:
    queue = QueueState(jobs={"j": job("j")})
    assert reaped(queue, FLEET, BATCH) == {}
    # A job confined to its own ladder does not hold a pod off that ladder.
    big = FleetConfig(ladder=LADDER, ladders={"big": ("2x A5000",)}, idle_policy="batch", warm_rungs=1)
    assert reaped(QueueState(jobs={"j": job("j", model="big")}), FLEET, big) == {"p1": "no_work", "p2": "no_work"}


def test_draining_and_drained_still_win() -> None:
    draining = FleetState(pods={"p": pod("p", "2x A5000")})
    draining.pods["p"].draining = True
    assert reaped(QueueState(), draining, BATCH) == {"p": "budget"}
    got = idle_reaps(QueueState(), FLEET, BATCH, 110.0, drained=True)
    assert {p.pod_id: r for p, r in got} == {"p0": "drained", "p1": "drained", "p2": "drained"}


def test_a_fallback_launch_waits_for_a_cheaper_live_pod_until_the_patience_runs_out() -> None:
    cfg = FleetConfig(ladder=LADDER, fallback_wait_s=1800.0)
    queue = QueueState(jobs={"old": job("old", queued_ts=1000.0), "new": job("new", queued_ts=2000.0)})
    target = queue.jobs["old"]
    busy_top = FleetState(pods={"p0": pod("p0", "2x A5000", status="busy")})
    assert fallback_waits(2, target, queue, busy_top, cfg, now=2500.0)  # oldest waited 1500 s < 1800 s
    assert not fallback_waits(2, target, queue, busy_top, cfg, now=2800.0)  # 1800 s: launch the fallback
    assert not fallback_waits(0, target, queue, busy_top, cfg, now=2500.0)  # the top rung never waits
    assert not fallback_waits(2, target, queue, FleetState(), cfg, now=2500.0)  # no cheaper pod to wait for
    worse = FleetState(pods={"p0": pod("p0", "4090", status="busy")})
    assert not fallback_waits(2, target, queue, worse, cfg, now=2500.0)  # only a pricier pod is up
    assert not fallback_waits(2, target, queue, busy_top, FleetConfig(ladder=LADDER), now=2500.0)  # default: off


@pytest.mark.parametrize(
    ("table", "message"),
    [({"idle_policy": "lazy"}, "idle_policy must be one of"), ({"warm_rungs": -1}, "warm_rungs must be >= 0")],
)
def test_bad_batch_keys_are_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FleetConfig.from_mapping(table, source="run.toml")
