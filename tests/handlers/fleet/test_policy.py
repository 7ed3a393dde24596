"""The dispatcher's pure decisions: how many pods, which rung, which job onto which pod, when to reap, what is owed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import JobFailed, JobRequeued
from handlers.fleet.policy import (
    FleetConfig,
    assignment,
    attempt_lost,
    choose_rung,
    fits,
    gpu_seconds_usd,
    job_order,
    launch_target,
    owed_usd,
    parse_rung,
    pods_to_request,
    reap_reason,
    rung_label,
    rung_rank,
    surplus_pod,
    upgrade_launch,
)
from handlers.fleet.projection import FleetState, PodEntry
from handlers.fleet.queue import JobEntry, QueueState

counts = st.integers(0, 40)


@given(counts, counts, counts, counts, st.integers(1, 20))
def test_pods_to_request_covers_waiting_work_within_the_cap(
    waiting: int, available: int, booting: int, busy: int, max_pods: int
) -> None:
    live = available + booting + busy
    n = pods_to_request(waiting=waiting, available=available, booting=booting, live=live, max_pods=max_pods)
    assert n >= 0
    assert n == 0 or live + n <= max_pods  # never past the cap
    assert available + booting + n <= max(waiting, available + booting)  # never more than the work needs
    if live < max_pods:
        assert available + booting + n >= min(waiting, available + booting + max_pods - live)  # enough, if allowed


def test_the_ladder_skips_rungs_out_of_stock_until_their_cooldown_passes() -> None:
    cfg = FleetConfig(ladder=("A", "B", "C"), stockout_cooldown_s=100.0)
    fleet = FleetState(stockouts={"A": 1000.0, "B": 1050.0})
    assert choose_rung(fleet, cfg, 1060.0) == (2, "C")
    assert choose_rung(fleet, cfg, 1100.0) == (0, "A")  # A's cooldown is over: back to the preferred type
    fleet.stockouts["C"] = 1060.0
    assert choose_rung(fleet, cfg, 1070.0) is None


def job(job_id: str, order: int, status: str = "queued", attempts: int = 0) -> JobEntry:
    return JobEntry(
        job_id=job_id,
        episode_id="e",
        family="f",
        base_model="m",
        bundle="b",
        order=order,
        status=status,
        attempts=attempts,
    )


def test_the_oldest_job_goes_to_the_pod_idle_longest() -> None:
    queue = QueueState(jobs={"b": job("b", 5, "requeued", 1), "a": job("a", 9), "c": job("c", 1, "running", 1)})
    fleet = FleetState(
        pods={
            "p0": PodEntry(pod_id="p0", status="idle", idle_since=50.0),
            "p1": PodEntry(pod_id="p1", status="ready", idle_since=20.0),
            "p2": PodEntry(pod_id="p2", status="idle", idle_since=10.0, draining=True),
            "p3": PodEntry(pod_id="p3", status="busy"),
        }
    )
    a = assignment(queue, fleet)
    assert a is not None and (a.job_id, a.pod_id, a.attempt) == ("b", "p1", 2)
    assert assignment(QueueState(), fleet) is None


def test_a_lost_attempt_is_requeued_until_the_attempts_are_spent() -> None:
    cfg = FleetConfig(max_attempts=2)
    first = job("j", 0, "running", 1)
    first.key, first.pod_id = "k1", "p0"
    out = attempt_lost(first, "k1", "pod died", cfg)
    assert isinstance(out, JobRequeued) and (out.key, out.attempt, out.pod_id) == ("k1", 1, "p0")
    assert attempt_lost(first, "stale-key", "pod died", cfg) is None
    second = job("j", 0, "assigned", 2)
    second.key = "k2"
    out = attempt_lost(second, "k2", "pod died", cfg)
    assert isinstance(out, JobFailed) and out.reason == "pod_lost" and "2 attempt" in out.detail


def test_reaping() -> None:
    cfg = FleetConfig(idle_ttl_s=60.0)
    idle = PodEntry(pod_id="p", status="idle", idle_since=100.0)
    assert reap_reason(idle, cfg, 159.0, drained=False) is None
    assert reap_reason(idle, cfg, 160.0, drained=False) == "idle_ttl"
    assert reap_reason(idle, cfg, 101.0, drained=True) == "drained"
    assert reap_reason(PodEntry(pod_id="p", status="idle", idle_since=100.0, draining=True), cfg, 101.0, drained=False)
    assert reap_reason(PodEntry(pod_id="p", status="busy"), cfg, 1e9, drained=True) is None


def test_owed_gpu_time() -> None:
    pod = PodEntry(pod_id="p", created_ts=1000.0, charged_usd=0.5)
    assert owed_usd(pod, 3600.0, 1002.0) == (1.5, 2.0)  # $1/s for 2 s, $0.5 already paid
    assert owed_usd(pod, 3600.0, 999.0) == (0.0, 0.0)
    assert owed_usd(PodEntry(pod_id="q"), 3600.0, 5000.0) == (0.0, 0.0)  # never created: nothing billed


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"max_pods": 0}, "max_pods"),
        ({"ladder": []}, "ladder"),
        ({"ladder": ["A", "A"]}, "twice"),
        ({"idle_ttl_s": -1}, "idle_ttl_s"),
        ({"tick_s": 0}, "tick_s"),
        ({"max_podz": 3}, "unknown key"),
        ({"max_pods": "many"}, "max_pods"),
    ],
)
def test_bad_fleet_config_names_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FleetConfig.from_mapping(table, source="run.toml")


def test_fleet_config_from_a_table() -> None:
    cfg = FleetConfig.from_mapping({"max_pods": 4, "ladder": ["NVIDIA A40"], "pins": {"prime_rl": "abc123"}})
    assert (cfg.max_pods, cfg.ladder, cfg.pins) == (4, ("NVIDIA A40",), {"prime_rl": "abc123"})


def test_rungs_name_a_gpu_count_and_read_back() -> None:
    assert parse_rung("NVIDIA A40") == ("NVIDIA A40", 1)
    assert parse_rung("2x NVIDIA RTX A5000") == ("NVIDIA RTX A5000", 2)
    assert rung_label("NVIDIA RTX A5000", 2) == "2x NVIDIA RTX A5000" and rung_label("A", 1) == "A"
    assert parse_rung("0x A") == ("0x A", 1)  # not a count: the whole string is a GPU type (the price check refuses it)


def test_longest_first_serves_the_biggest_estimate_then_the_budget_then_queue_order() -> None:
    a, b, c, d = job("a", 1), job("b", 2), job("c", 3), job("d", 4)
    b.estimate_s, c.time_budget_s, d.estimate_s = 600.0, 900.0, 600.0
    queue = QueueState(jobs={j.job_id: j for j in (a, b, c, d)})
    fleet = FleetState(pods={"p0": PodEntry(pod_id="p0", status="idle")})
    first = assignment(queue, fleet, FleetConfig())
    assert first is not None and first.job_id == "c"  # no estimate: its time budget stands in
    assert sorted(queue.jobs.values(), key=job_order(FleetConfig()))[:3] == [c, b, d]  # ties: queue order
    oldest = assignment(queue, fleet, FleetConfig(order="oldest_first"))
    assert oldest is not None and oldest.job_id == "a"


def test_a_model_with_its_own_ladder_runs_only_on_its_rungs_and_prefers_the_cheapest() -> None:
    cfg = FleetConfig(ladder=("A40",), ladders={"big": ("2x A5000", "A40")})
    big, small = job("big", 1), job("small", 2)
    big.base_model = "big"
    pods = {
        "p0": PodEntry(pod_id="p0", status="idle", gpu_type="4090", idle_since=1.0),
        "p1": PodEntry(pod_id="p1", status="idle", gpu_type="A40", idle_since=2.0),
        "p2": PodEntry(pod_id="p2", status="idle", gpu_type="A5000", gpu_count=2, idle_since=3.0),
    }
    assert not fits(pods["p0"], big, cfg) and fits(pods["p0"], small, cfg)
    queue = QueueState(jobs={"big": big})
    a = assignment(queue, FleetState(pods=pods), cfg)
    assert a is not None and a.pod_id == "p2"  # the top rung of its ladder, though p1 idled longer
    only_4090 = FleetState(pods={"p0": pods["p0"]})
    assert assignment(queue, only_4090, cfg) is None
    target = launch_target(queue, only_4090, cfg)
    assert target is big  # nothing booting or free fits it: launch for it, on its ladder
    assert choose_rung(only_4090, cfg, 0.0, "big") == (0, "2x A5000")


def test_a_stock_out_of_a_gpu_type_cools_down_every_rung_of_that_type() -> None:
    cfg = FleetConfig(ladder=("2x A5000", "A40"), stockout_cooldown_s=100.0)
    fleet = FleetState(stockouts={"A5000": 1000.0})  # what pod.provision_failed records: the GPU type
    assert choose_rung(fleet, cfg, 1050.0) == (1, "A40")
    assert choose_rung(fleet, cfg, 1100.0) == (0, "2x A5000")


def test_upgrades_launch_onto_the_top_rung_and_retire_the_priciest_pod_when_it_comes_free() -> None:
    cfg = FleetConfig(max_pods=2, ladder=("A5000", "A6000", "4090"), upgrade_pods=1)
    waiting = QueueState(jobs={"w": job("w", 1)})
    pricey = PodEntry(pod_id="p0", status="busy", gpu_type="4090")
    fine = PodEntry(pod_id="p1", status="busy", gpu_type="A6000")
    fleet = FleetState(pods={"p0": pricey, "p1": fine})
    assert upgrade_launch(waiting, fleet, cfg, 0.0) == (0, "A5000")
    assert upgrade_launch(waiting, fleet, FleetConfig(max_pods=2, ladder=cfg.ladder), 0.0) is None  # off by default
    assert upgrade_launch(QueueState(), fleet, cfg, 0.0) is None  # no work waits: nothing to move
    fleet.stockouts["A5000"] = 0.0
    assert upgrade_launch(waiting, fleet, cfg, 10.0) is None  # the top rung is cooling down
    near = FleetState(pods={"p1": fine, "p2": PodEntry(pod_id="p2", status="busy", gpu_type="A6000")})
    assert upgrade_launch(waiting, near, cfg, 0.0) is None  # one rung down: not worth a boot
    # the upgrade is up: three live pods for a cap of two
    fleet.pods["p3"] = PodEntry(pod_id="p3", status="ready", gpu_type="A5000")
    assert upgrade_launch(waiting, fleet, cfg, 1e6) is None  # max_pods + upgrade_pods reached
    assert surplus_pod(waiting, fleet, cfg) is None  # the priciest pod is busy; the new one is kept
    pricey.status = "idle"
    assert surplus_pod(waiting, fleet, cfg) is pricey
    assert rung_rank(pricey, cfg.ladder) == 2 and rung_rank(PodEntry(pod_id="x"), cfg.ladder) == 3


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"order": "random"}, "fleet.order"),
        ({"upgrade_pods": -1}, "upgrade_pods"),
        ({"ladders": {"m": []}}, "ladders.m"),
        ({"ladders": {"m": ["A", "A"]}}, "twice"),
    ],
)
def test_fleet_config_rejects_bad_new_keys_by_name(table: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FleetConfig.from_mapping(table)


def test_a_job_is_priced_per_gpu_second() -> None:
    one = PodEntry(pod_id="p0", gpu_type="A5000", usd_per_hour=0.27)
    two = PodEntry(pod_id="p1", gpu_type="A5000", gpu_count=2, usd_per_hour=0.54)  # the pod's rate: 2 x 0.27
    assert gpu_seconds_usd(one, 3600.0) == (3600.0, pytest.approx(0.27))
    gpu_s, usd = gpu_seconds_usd(two, 3600.0)  # an hour of wall time holds both GPUs: 2 GPU-hours
    assert gpu_s == 7200.0 and usd == pytest.approx(0.54)
    assert gpu_seconds_usd(two, -5.0) == (0.0, 0.0)
