"""The fleet simulation drives the REAL dispatcher on virtual time: determinism, exactly-once completion under
pod deaths, ladder fallback and cooldown, the pod cap, the budget gate, the idle TTL, the makespan against its
lower bound, and longest-first against oldest-first."""

from __future__ import annotations

import itertools
import time
from collections import Counter

import msgspec
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from adapters.sim import (
    PREFIX,
    SIM_FLEET,
    DurationModel,
    SimConfig,
    SimGpu,
    SimJob,
    SimResult,
    batched_arrivals,
    lower_bound_s,
    make_jobs,
    simulate,
    summary,
    summary_lines,
)
from handlers.fleet.policy import FleetConfig

CHEAP = SimGpu(gpu_type="cheap", usd_per_hour=0.3, stockout_fraction=0.0)
NEVER = SimGpu(gpu_type="never", usd_per_hour=0.1, stockout_fraction=1.0)
FLAKY = SimGpu(gpu_type="flaky", usd_per_hour=0.5, stockout_fraction=0.5, mean_outage_s=0.0)
SMALL = DurationModel(median_s=600, max_s=3600)
MARKET = (NEVER, FLAKY, CHEAP)


def jobs(n: int, seed: int = 0, **kw: object) -> list[SimJob]:
    return make_jobs(n, SMALL, seed, **kw)  # type: ignore[arg-type]


def config(
    seed: int = 0, ladder: tuple[str, ...] = ("cheap",), *, fleet: dict[str, object] | None = None, **world: object
) -> SimConfig:
    table = msgspec.structs.replace(SIM_FLEET, ladder=ladder, **(fleet or {}))
    return SimConfig(**{"seed": seed, "fleet": table, "market": MARKET, **world})  # type: ignore[arg-type]


def live_pods_over_time(result: SimResult) -> list[int]:
    live, counts = 0, []
    for event in result.trace:
        if event.kind == "pod.created":
            live += 1
        elif event.kind in ("pod.terminated", "pod.lost"):
            live -= 1
        counts.append(live)
    return counts


def test_same_seed_same_run_and_another_seed_another() -> None:
    cfg = config(7, ("flaky", "cheap"), fleet={"max_pods": 4}, pod_mttf_s=3 * 3600)
    a = simulate(jobs(60, seed=1), cfg)
    b = simulate(jobs(60, seed=1), cfg)
    c = simulate(jobs(60, seed=1), msgspec.structs.replace(cfg, seed=8))
    assert msgspec.json.encode(a) == msgspec.json.encode(b)
    assert msgspec.json.encode(a.trace) != msgspec.json.encode(c.trace)


def test_the_simulation_leaves_the_process_log_config_as_it_found_it() -> None:
    # It silences the dispatcher while it runs; left silenced, a later caller's warnings (a torn log tail
    # recovered) were filtered out before anything could see them.
    before = structlog.get_config()
    with capture_logs() as seen:
        simulate(jobs(3), config())
        structlog.get_logger("caller").warning("after.simulate")
    assert [e["event"] for e in seen if e["event"] == "after.simulate"] == ["after.simulate"]
    assert structlog.get_config()["wrapper_class"] is before["wrapper_class"]


def test_a_simulated_day_takes_seconds_not_a_day() -> None:
    started = time.perf_counter()
    result = simulate(jobs(40), config(fleet={"max_pods": 2}))
    assert result.wall_clock_h > 3  # 40 jobs of ~10 min on 2 pods
    assert time.perf_counter() - started < 30


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 30),
    max_pods=st.integers(1, 5),
    mttf_h=st.floats(0.2, 20.0),
    max_attempts=st.integers(1, 4),
    order=st.sampled_from(["longest_first", "oldest_first"]),
    ttl=st.sampled_from([0.0, 60.0, 600.0]),
    batch=st.integers(1, 20),
)
def test_every_job_finishes_exactly_once_and_the_cap_holds(
    seed: int, n: int, max_pods: int, mttf_h: float, max_attempts: int, order: str, ttl: float, batch: int
) -> None:
    workload = jobs(n, seed=seed, arrivals=batched_arrivals(n, batch, 1800.0))
    fleet = {"max_pods": max_pods, "max_attempts": max_attempts, "order": order, "idle_ttl_s": ttl}
    result = simulate(
        workload,
        config(seed, ("flaky", "cheap"), fleet=fleet, pod_mttf_s=mttf_h * 3600, bootstrap_fail_prob=0.1),
    )
    terminal = Counter(e.job for e in result.trace if e.kind in ("job.succeeded", "job.failed"))
    assert terminal == Counter({j.job_id: 1 for j in workload})  # every job, exactly once
    assert result.unfinished == 0
    assert result.succeeded + result.failed == n
    # a job never runs on two pods at once, and never more often than the retry bound allows
    running: dict[str, str] = {}
    starts: Counter[str] = Counter()
    for e in result.trace:
        if e.kind == "job.assigned":
            assert e.job not in running
            running[e.job] = e.pod
            starts[e.job] += 1
        elif e.kind in ("job.succeeded", "job.failed", "job.requeued"):
            running.pop(e.job, None)
    assert max(starts.values()) <= max_attempts
    for job_id, outcome in result.outcomes.items():
        if outcome.status == "failed":
            assert outcome.attempts == max_attempts, job_id
    assert max(live_pods_over_time(result)) <= max_pods
    assert all(u.pod_hours >= u.busy_hours for u in result.by_gpu.values())


def test_pod_deaths_requeue_then_fail_after_the_bound() -> None:
    # Pods live ~2 minutes on average while jobs take ~10: most attempts die.
    result = simulate(jobs(12), config(3, fleet={"max_pods": 3, "max_attempts": 2}, pod_mttf_s=120.0))
    assert result.pod_deaths > 0
    assert result.job_retries > 0
    failed = [e for e in result.trace if e.kind == "job.failed"]
    assert failed and all(e.detail == "pod_lost" for e in failed)
    assert result.failed == len(failed)
    assert result.lost_work_s > 0


def test_stock_out_on_the_first_rung_falls_back_to_the_next() -> None:
    result = simulate(jobs(20), config(1, ("never", "cheap"), fleet={"max_pods": 5}, pod_mttf_s=None))
    created = [e for e in result.trace if e.kind == "pod.created"]
    assert created and {e.gpu for e in created} == {"cheap"}
    outs = [e for e in result.trace if e.kind == "pod.provision_failed" and e.detail == "stock_out"]
    assert outs and {e.gpu for e in outs} == {"never"}
    # the first burst of launches asks "never" once per pod (before any answer is back); within the cooldown
    # every later launch goes straight to the next rung
    assert len(outs) <= 5 and max(e.t for e in outs) <= min(e.t for e in created)
    assert result.by_gpu["never"].stockouts == len(outs) and result.by_gpu["never"].pods == 0
    assert result.succeeded == 20


def test_when_every_rung_is_out_the_walk_waits_for_the_cooldown_and_resumes() -> None:
    scarce = SimGpu(gpu_type="scarce", usd_per_hour=0.3, stockout_fraction=0.9, mean_outage_s=0.0)
    fleet = {"max_pods": 1, "stockout_cooldown_s": 120.0}
    cfg = config(5, ("scarce",), fleet=fleet, pod_mttf_s=None, market=(scarce,), bootstrap_fail_prob=0.0)
    result = simulate(jobs(6), cfg)
    assert result.succeeded == 6
    assert result.stockouts > 0
    outs = [e.t for e in result.trace if e.kind == "pod.provision_failed"]
    gaps = [b - a for a, b in itertools.pairwise(outs)]
    assert gaps and min(gaps) >= 120.0  # one request, waiting between walks: not a hot loop


def test_capacity_limit_is_a_stock_out() -> None:
    capped = SimGpu(gpu_type="capped", usd_per_hour=0.2, capacity=1)
    cfg = config(2, ("capped", "cheap"), fleet={"max_pods": 4}, pod_mttf_s=None, market=(capped, CHEAP))
    result = simulate(jobs(20), cfg)
    assert result.by_gpu["capped"].pods >= 1
    assert result.by_gpu["cheap"].pods >= 1
    assert result.by_gpu["capped"].stockouts > 0


def test_budget_cap_stops_new_pods() -> None:
    # Pods die every ~30 min, so the fleet keeps asking for replacements while spend accumulates.
    workload = jobs(60)
    base = config(4, fleet={"max_pods": 4, "max_attempts": 10, "reserve_s": 600.0}, pod_mttf_s=1800)
    free = simulate(workload, base)
    budget = free.cost_usd / 3
    capped = simulate(workload, msgspec.structs.replace(base, budget_usd=budget))
    refused = [e for e in capped.trace if e.kind == "cost.refused"]
    assert refused, "the budget never stopped a launch"
    assert capped.pods_launched < free.pods_launched
    assert capped.unfinished > 0 and capped.succeeded < free.succeeded
    # every pod's time is reserved before it is used; a busy pod whose next chunk is refused finishes its job
    longest = max(j.work_s for j in workload)
    assert capped.cost_usd <= budget + 4 * CHEAP.usd_per_hour * longest / 3600


def test_budget_too_small_for_any_pod_launches_nothing() -> None:
    result = simulate(jobs(5), config(budget_usd=0.01))
    assert result.pods_launched == 0
    assert result.unfinished == 5
    assert result.budget_refusals > 0
    assert result.cost_usd == 0


def test_idle_ttl_reaps_between_batches_and_a_long_ttl_keeps_pods_warm() -> None:
    workload = jobs(24, arrivals=batched_arrivals(24, 6, 4 * 3600.0))  # batches 4 h apart
    base = config(1, fleet={"max_pods": 3}, pod_mttf_s=None, bootstrap_fail_prob=0.0)
    world = {"pod_mttf_s": None, "bootstrap_fail_prob": 0.0}
    short = simulate(workload, config(1, fleet={"max_pods": 3, "idle_ttl_s": 600}, **world))
    warm = simulate(workload, config(1, fleet={"max_pods": 3, "idle_ttl_s": 5 * 3600}, **world))
    reaped = [e for e in short.trace if e.kind == "pod.terminating" and e.detail == "idle_ttl"]
    assert len(reaped) >= 3 * 3  # the pool is emptied after each of the first three batches
    assert short.pods_launched > warm.pods_launched == 3
    assert warm.idle_fraction > short.idle_fraction
    tick = base.fleet.tick_s
    for event in reaped:  # reaped after a full TTL of idleness (and within a tick of it)
        before = [e for e in short.trace if e.pod == event.pod and e.t < event.t]
        assert 600 <= event.t - before[-1].t <= 600 + tick + 1e-6


def test_makespan_never_beats_the_lower_bound() -> None:
    for seed in range(3):
        workload = jobs(30, seed=seed)
        result = simulate(workload, config(seed, fleet={"max_pods": 4}, pod_mttf_s=None, provision_median_s=0.0))
        assert result.makespan_s >= result.lower_bound_s - 1e-6


def test_lower_bound_is_below_a_brute_force_optimum() -> None:
    model = DurationModel(median_s=600, max_s=3600, tail_prob=0.3)
    for seed in range(20):
        small = make_jobs(6, model, seed, arrivals=[0, 0, 0, 0, 300 * (seed % 3), 600])
        best = float("inf")
        for assignment in itertools.product(range(2), repeat=len(small)):
            finish = []
            for machine in range(2):
                t = 0.0
                for job in sorted(
                    (j for j, m in zip(small, assignment, strict=True) if m == machine), key=lambda j: j.arrival_s
                ):
                    t = max(t, job.arrival_s) + job.work_s
                finish.append(t)
            best = min(best, max(finish))
        bound = lower_bound_s(small, 2)
        assert bound <= best + 1e-9
        assert bound >= max(j.arrival_s + j.work_s for j in small)


def test_lower_bound_formula_when_everything_is_queued_at_once() -> None:
    workload = jobs(100, seed=9)
    total = sum(j.work_s for j in workload)
    longest = max(j.work_s for j in workload)
    assert lower_bound_s(workload, 16) == pytest.approx(max(longest, total / 16))
    assert lower_bound_s(workload, 1) == pytest.approx(total)


@pytest.mark.slow
def test_longest_first_keeps_a_drain_near_its_bound_and_beats_oldest_first() -> None:
    # The benchmark's drain scenario (benchmarks/fleet_sim.py), smaller: heavy-tailed jobs, 6 pods.
    ratios: dict[str, list[float]] = {"longest_first": [], "oldest_first": []}
    for seed in range(2):
        workload = make_jobs(240, DurationModel(), seed)
        for order in ratios:
            cfg = SimConfig(seed=seed, fleet=msgspec.structs.replace(SIM_FLEET, max_pods=6, order=order))
            result = simulate(workload, cfg)
            assert result.succeeded + result.failed == 240
            ratios[order].append(result.makespan_ratio)
    assert max(ratios["longest_first"]) <= 1.05
    assert sum(ratios["longest_first"]) < sum(ratios["oldest_first"])


def test_everything_is_labelled_simulated() -> None:
    result = simulate(jobs(10), config(0, ("flaky", "cheap"), fleet={"max_pods": 2}))
    assert result.simulated is True
    assert result.trace and all(e.simulated for e in result.trace)
    assert all(o.simulated for o in result.outcomes.values())
    assert all(u.simulated for u in result.by_gpu.values())
    assert summary(result)["simulated"] is True
    lines = summary_lines(result, "unit")
    assert lines and all(line.startswith(PREFIX) for line in lines)
    encoded = msgspec.json.decode(msgspec.json.encode(result))
    assert encoded["simulated"] is True and all(e["simulated"] for e in encoded["trace"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"market": ()}, "market"),
        ({"fleet": FleetConfig(ladder=("nope",))}, "lacks"),
        ({"pod_mttf_s": 0.0}, "pod_mttf_s"),
        ({"bootstrap_fail_prob": 1.0}, "bootstrap_fail_prob"),
    ],
)
def test_config_rejects_nonsense(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SimConfig(**kwargs)  # type: ignore[arg-type]


def test_duplicate_job_ids_are_rejected() -> None:
    job = SimJob(job_id="same", work_s=10, estimate_s=10)
    with pytest.raises(ValueError, match="unique"):
        simulate([job, job], config())


def test_a_run_that_cannot_finish_stops_at_the_horizon() -> None:
    result = simulate(jobs(5), config(0, ("never",), fleet={"max_pods": 2}, horizon_s=3600.0))
    assert result.unfinished == 5 and result.pods_launched == 0
    assert result.stockouts > 0
    assert all(e.t <= 3600.0 for e in result.trace)


def test_a_two_gpu_rung_launches_two_gpu_pods_billed_per_gpu_and_upgrades_stay_within_their_slack() -> None:
    pair = SimGpu(gpu_type="pair", usd_per_hour=0.25, stockout_fraction=0.5, mean_outage_s=600.0)
    fleet = {"max_pods": 3, "ladders": {"big": ("2x pair", "cheap")}, "upgrade_pods": 1}
    cfg = config(2, ("cheap",), fleet=fleet, market=(pair, CHEAP), speeds={"2x pair": {"big": 2.0}}, pod_mttf_s=None)
    workload = [msgspec.structs.replace(j, model="big") for j in jobs(30, seed=2)]
    result = simulate(workload, cfg)
    assert result.succeeded == 30
    usage = result.by_gpu["2x pair"]
    assert usage.pods >= 1 and usage.cost_usd == pytest.approx(usage.pod_hours * 2 * 0.25)
    assert max(live_pods_over_time(result)) <= 3 + 1
    # a stock-out of "pair" cools the rung down instead of being asked again at once (no hot loop)
    outs = sorted(e.t for e in result.trace if e.kind == "pod.provision_failed" and e.gpu == "pair")
    assert all(b - a >= cfg.fleet.stockout_cooldown_s or b == a for a, b in itertools.pairwise(outs))


@pytest.mark.parametrize("as_json", [False, True])
def test_benchmark_labels_every_line_simulated(as_json: bool, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_sim.py"
    main = runpy.run_path(str(script))["main"]
    # Few jobs: what is checked is the labelling of every line, not the figures.
    assert main(["--seeds", "1", "--jobs", "6", "--max-pods", "2"] + (["--json"] if as_json else [])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 10
    for line in lines:
        if as_json:
            assert json.loads(line)["simulated"] is True, line
        else:
            assert line.startswith(PREFIX), line
