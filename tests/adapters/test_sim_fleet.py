"""The simulated fleet: determinism, exactly-once completion under pod deaths, ladder fallback, the pod
cap, the budget gate, the idle TTL, and the makespan against its lower bound."""

from __future__ import annotations

import itertools
from collections import Counter

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.sim import (
    PREFIX,
    DurationModel,
    FleetConfig,
    Policy,
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

CHEAP = SimGpu(gpu_type="cheap", usd_per_hour=0.3, stockout_fraction=0.0)
NEVER = SimGpu(gpu_type="never", usd_per_hour=0.1, stockout_fraction=1.0)
FLAKY = SimGpu(gpu_type="flaky", usd_per_hour=0.5, stockout_fraction=0.5, mean_outage_s=0.0)
SMALL = DurationModel(median_s=600, max_s=3600)


def jobs(n: int, seed: int = 0, **kw: object) -> list[SimJob]:
    return make_jobs(n, SMALL, seed, **kw)  # type: ignore[arg-type]


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
    config = FleetConfig(seed=7, max_pods=4, ladder=(FLAKY, CHEAP), pod_mttf_s=3 * 3600)
    a = simulate(jobs(120, seed=1), config)
    b = simulate(jobs(120, seed=1), config)
    c = simulate(jobs(120, seed=1), msgspec.structs.replace(config, seed=8))
    assert msgspec.json.encode(a) == msgspec.json.encode(b)
    assert msgspec.json.encode(a.trace) != msgspec.json.encode(c.trace)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 60),
    max_pods=st.integers(1, 6),
    mttf_h=st.floats(0.2, 20.0),
    max_attempts=st.integers(1, 4),
    policy=st.sampled_from(Policy),
    ttl=st.sampled_from([0.0, 60.0, 600.0]),
    batch=st.integers(1, 20),
)
def test_every_job_finishes_exactly_once_and_the_cap_holds(
    seed: int, n: int, max_pods: int, mttf_h: float, max_attempts: int, policy: Policy, ttl: float, batch: int
) -> None:
    workload = jobs(n, seed=seed, arrivals=batched_arrivals(n, batch, 1800.0))
    config = FleetConfig(
        seed=seed,
        max_pods=max_pods,
        ladder=(FLAKY, CHEAP),
        pod_mttf_s=mttf_h * 3600,
        max_attempts=max_attempts,
        policy=policy,
        idle_ttl_s=ttl,
        bootstrap_fail_prob=0.1,
    )
    result = simulate(workload, config)
    terminal = Counter(e.job for e in result.trace if e.kind in ("job.succeeded", "job.failed"))
    assert terminal == Counter({j.job_id: 1 for j in workload})  # every job, exactly once
    assert result.unfinished == 0
    assert result.succeeded + result.failed == n
    # a job never runs on two pods at once, and never more often than the retry bound allows
    running: dict[str, str] = {}
    starts: Counter[str] = Counter()
    for e in result.trace:
        if e.kind == "job.started":
            assert e.job not in running
            running[e.job] = e.pod
            starts[e.job] += 1
        elif e.kind in ("job.succeeded", "job.failed", "job.requeued"):
            running.pop(e.job, None)
        elif e.kind == "pod.lost":
            running = {j: p for j, p in running.items() if p != e.pod}
    assert max(starts.values()) <= max_attempts
    for job_id, outcome in result.outcomes.items():
        if outcome.status == "failed":
            assert outcome.attempts == max_attempts, job_id
    assert max(live_pods_over_time(result)) <= max_pods


def test_pod_deaths_requeue_then_fail_after_the_bound() -> None:
    # Pods live ~1 minute on average while jobs take ~10: most attempts die.
    config = FleetConfig(seed=3, max_pods=3, ladder=(CHEAP,), pod_mttf_s=60.0, max_attempts=2)
    result = simulate(jobs(30), config)
    assert result.pod_deaths > 0
    assert result.job_retries > 0
    failed = [e for e in result.trace if e.kind == "job.failed"]
    assert failed and all("pod_lost" in e.detail for e in failed)
    assert result.failed == len(failed)
    assert result.lost_work_s > 0


def test_stock_out_on_the_first_rung_falls_back_to_the_next() -> None:
    result = simulate(jobs(40), FleetConfig(seed=1, max_pods=5, ladder=(NEVER, CHEAP), pod_mttf_s=None))
    created = [e for e in result.trace if e.kind == "pod.created"]
    assert created and {e.gpu for e in created} == {"cheap"}
    outs = [e for e in result.trace if e.kind == "pod.stock_out"]
    assert len(outs) == len(created) and {e.gpu for e in outs} == {"never"}
    # each stock-out is followed by a create on the next rung, not a wait
    assert all(e.detail == "rung 1" for e in created)
    assert result.by_gpu["never"].stockouts == len(outs) and result.by_gpu["never"].pods == 0
    assert result.succeeded == 40


def test_when_every_rung_is_out_the_walk_backs_off_and_resumes() -> None:
    ladder = (SimGpu(gpu_type="scarce", usd_per_hour=0.3, stockout_fraction=0.9, mean_outage_s=0.0),)
    config = FleetConfig(
        seed=5, max_pods=1, ladder=ladder, pod_mttf_s=None, ladder_backoff_s=120.0, bootstrap_fail_prob=0.0
    )
    result = simulate(jobs(10), config)
    assert result.succeeded == 10
    assert result.stockouts > 0
    outs = [e.t for e in result.trace if e.kind == "pod.stock_out"]
    gaps = [b - a for a, b in itertools.pairwise(outs)]
    assert gaps and min(gaps) >= config.ladder_backoff_s  # one request, waiting between walks: not a hot loop


def test_capacity_limit_is_a_stock_out() -> None:
    capped = SimGpu(gpu_type="capped", usd_per_hour=0.2, capacity=1)
    result = simulate(jobs(20), FleetConfig(seed=2, max_pods=4, ladder=(capped, CHEAP), pod_mttf_s=None))
    assert result.by_gpu["capped"].pods >= 1
    assert result.by_gpu["cheap"].pods >= 1
    assert result.by_gpu["capped"].stockouts > 0


def test_budget_cap_stops_new_pods() -> None:
    # Pods die every ~30 min, so the fleet keeps asking for replacements while spend accumulates.
    workload = jobs(200)
    base = FleetConfig(seed=4, max_pods=4, ladder=(CHEAP,), pod_mttf_s=1800, max_attempts=10)
    free = simulate(workload, base)
    budget = free.cost_usd / 3
    capped = simulate(workload, msgspec.structs.replace(base, budget_usd=budget))
    refused = [e for e in capped.trace if e.kind == "budget.refused" and e.detail == "no new pod"]
    assert refused, "the budget never stopped a launch"
    assert all(e.usd > budget for e in refused)  # refused because the reservation would overrun
    launches = [e for e in capped.trace if e.kind == "pod.created"]
    assert launches and all(e.usd <= budget + 1e-9 for e in launches)  # every launch passed the gate
    assert capped.pods_launched < free.pods_launched
    assert capped.unfinished > 0 and capped.succeeded < free.succeeded
    assert capped.cost_usd <= budget * 1.05  # overrun only by jobs that outran their estimates


def test_budget_too_small_for_any_pod_launches_nothing() -> None:
    result = simulate(jobs(5), FleetConfig(seed=0, ladder=(CHEAP,), budget_usd=0.01))
    assert result.pods_launched == 0
    assert result.unfinished == 5
    assert result.budget_refusals > 0
    assert result.cost_usd == 0


def test_idle_ttl_reaps_between_batches_and_a_long_ttl_keeps_pods_warm() -> None:
    workload = jobs(40, arrivals=batched_arrivals(40, 10, 4 * 3600.0))  # batches 4 h apart
    base = FleetConfig(seed=1, max_pods=4, ladder=(CHEAP,), pod_mttf_s=None, bootstrap_fail_prob=0.0)
    short = simulate(workload, msgspec.structs.replace(base, idle_ttl_s=600))
    warm = simulate(workload, msgspec.structs.replace(base, idle_ttl_s=5 * 3600))
    reaped = [e for e in short.trace if e.kind == "pod.terminated" and e.detail == "idle_ttl"]
    assert len(reaped) >= 4 * 3  # the pool is emptied after each of the first three batches
    assert short.pods_launched > warm.pods_launched == 4
    assert warm.idle_fraction > short.idle_fraction
    for event in reaped:  # reaped only after a full TTL of idleness
        pod_events = [e for e in short.trace if e.pod == event.pod and e.t <= event.t and e.kind != "pod.terminated"]
        assert event.t - pod_events[-1].t >= 600 - 1e-9


def test_makespan_never_beats_the_lower_bound() -> None:
    for seed in range(5):
        workload = jobs(50, seed=seed)
        result = simulate(
            workload,
            FleetConfig(seed=seed, max_pods=5, ladder=(CHEAP,), pod_mttf_s=None, provision_median_s=0.0),
        )
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


def test_headline_arc_meets_the_target_with_lpt_and_lpt_beats_fifo() -> None:
    # The benchmark's scenario (benchmarks/fleet_sim.py), on fewer seeds.
    ratios: dict[Policy, list[float]] = {Policy.LPT: [], Policy.FIFO: []}
    for seed in range(3):
        workload = make_jobs(1750, DurationModel(), seed)
        for policy in ratios:
            result = simulate(workload, FleetConfig(seed=seed, policy=policy))
            assert result.succeeded + result.failed == 1750
            ratios[policy].append(result.makespan_ratio)
    assert max(ratios[Policy.LPT]) <= 1.05
    assert sum(ratios[Policy.LPT]) < sum(ratios[Policy.FIFO])


def test_everything_is_labelled_simulated() -> None:
    result = simulate(jobs(20), FleetConfig(seed=0, max_pods=2, ladder=(FLAKY, CHEAP)))
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
    "kwargs",
    [
        {"max_pods": 0},
        {"ladder": ()},
        {"max_attempts": 0},
        {"pod_mttf_s": 0.0},
        {"bootstrap_fail_prob": 1.0},
        {"ladder_backoff_s": 0.0, "stockout_latency_s": 0.0},
    ],
)
def test_config_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="FleetConfig"):
        FleetConfig(**kwargs)  # type: ignore[arg-type]


def test_duplicate_job_ids_are_rejected() -> None:
    job = SimJob(job_id="same", work_s=10, estimate_s=10)
    with pytest.raises(ValueError, match="unique"):
        simulate([job, job], FleetConfig())


@pytest.mark.parametrize("as_json", [False, True])
def test_benchmark_labels_every_line_simulated(as_json: bool, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_sim.py"
    main = runpy.run_path(str(script))["main"]
    assert main(["--seeds", "1", "--jobs", "150", "--max-pods", "4"] + (["--json"] if as_json else [])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 10
    for line in lines:
        if as_json:
            assert json.loads(line)["simulated"] is True, line
        else:
            assert line.startswith(PREFIX), line


def test_a_run_that_cannot_finish_stops_at_the_horizon() -> None:
    result = simulate(jobs(5), FleetConfig(seed=0, max_pods=2, ladder=(NEVER,), horizon_s=3600.0))
    assert result.unfinished == 5 and result.pods_launched == 0
    assert result.stockouts > 0
    assert all(e.t <= 3600.0 for e in result.trace)
