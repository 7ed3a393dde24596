"""The dispatcher reactor, in process: a fake provider, in-process pod agents, a fake inner trainer."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from events import (
    CostRefused,
    CostReleased,
    CostReserved,
    CostSettled,
    JobAssigned,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodTerminated,
    PodTerminating,
    Recorded,
)
from handlers.budget.rules import BudgetProjection
from handlers.fleet.dispatcher import DispatcherFatal
from handlers.fleet.projection import LIVE, FleetProjection
from handlers.fleet.queue import QueueProjection
from handlers.ports.provider import PodState, ProviderAuthError, pod_name
from tests.fakes.fleet import FakeProvider
from tests.fakes.inner import FakeInnerTrainer
from tests.handlers.fleet.fleet_world import FAST, RUN, World, budget, prices, queue_jobs

pytestmark = pytest.mark.timeout(30)


def check_invariants(records: list[Recorded], max_pods: int) -> None:
    """What must hold in any dispatcher log: each job finishes at most once, one open attempt at a time, and
    never more live pods than the cap."""
    finished: Counter[str] = Counter()
    open_attempt: dict[str, str] = {}
    fleet, state = FleetProjection(), FleetProjection().initial()
    for rec in records:
        ev = rec.event
        state = fleet.apply(state, rec)
        assert sum(1 for p in state.pods.values() if p.status in LIVE) <= max_pods
        if isinstance(ev, JobAssigned):
            assert ev.job_id not in open_attempt, f"{ev.job_id} assigned twice at once"
            open_attempt[ev.job_id] = ev.key
        elif isinstance(ev, JobSucceeded | JobFailed | JobRequeued) and ev.key:
            assert open_attempt.pop(ev.job_id) == ev.key
        if isinstance(ev, JobSucceeded | JobFailed):
            finished[ev.job_id] += 1
    assert all(n == 1 for n in finished.values()), finished


async def test_drains_the_queue_within_the_pod_cap_and_terminates_every_pod(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider, config=msgspec.structs.replace(FAST, max_pods=2))
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 5)
        summary = await world.dispatcher(rt).run()
        queue = rt.state(QueueProjection)
        pending = rt.pending_requests()
    assert (summary.status, summary.succeeded, summary.waiting) == ("drained", 5, 0)
    assert pending == []  # every request (launch, attempt, termination) got its outcome, with its key
    assert {j.status for j in queue.jobs.values()} == {"succeeded"}
    check_invariants(world.records(), max_pods=2)
    assert len(world.events(PodRequested)) == 2  # pods are reused: no pod per job
    assert provider.live() == []
    assert {e.reason for e in world.events(PodTerminating)} == {"drained"}
    # Progress reached the log, with cursors, and the result document is in the blob store.
    assert world.events(JobProgressed) and all(e.cursor > 0 for e in world.events(JobProgressed))
    done = world.events(JobSucceeded)
    assert all(e.pre == 0.1 and e.post == 0.4 and e.result_blob in world.blobs for e in done)


async def test_a_pod_that_dies_mid_job_requeues_it_and_it_finishes_exactly_once(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider, trainer=lambda: FakeInnerTrainer(seconds=0.3, steps=3))
    killed: list[str] = []

    async def kill_first_pod_once_started(rt: Any) -> None:
        while not killed:
            await anyio.sleep(0.01)
            started = [r.event for r in rt_records(rt) if isinstance(r.event, JobStarted)]
            if started:
                pod = rt.state(FleetProjection).pods[started[0].pod_id]
                provider.kill(pod.provider_id)
                await world.agents.kill(pod.url)
                killed.append(started[0].job_id)

    def rt_records(_rt: Any) -> list[Recorded]:
        return world.records()

    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_first_pod_once_started, rt)
            summary = await world.dispatcher(rt).run()
    assert (summary.status, summary.succeeded, summary.failed) == ("drained", 2, 0)
    requeued = world.events(JobRequeued)
    assert [e.job_id for e in requeued] == killed and requeued[0].attempt == 1
    assert len(world.events(PodLost)) == 1
    assert Counter(e.job_id for e in world.events(JobSucceeded)) == {"j0": 1, "j1": 1}
    assert [e.attempt for e in world.events(JobSucceeded) if e.job_id == killed[0]] == [2]
    check_invariants(world.records(), max_pods=FAST.max_pods)
    assert provider.live() == []


async def test_a_job_whose_pods_keep_dying_fails_after_max_attempts(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(
        tmp_path,
        provider,
        trainer=lambda: FakeInnerTrainer(seconds=5.0, steps=50),
        config=msgspec.structs.replace(FAST, max_attempts=2),
    )

    async def kill_every_started_pod() -> None:
        seen: set[str] = set()
        while True:
            await anyio.sleep(0.01)
            for e in world.events(JobStarted):
                if e.pod_id not in seen:
                    seen.add(e.pod_id)
                    pod = rt.state(FleetProjection).pods[e.pod_id]
                    provider.kill(pod.provider_id)
                    await world.agents.kill(pod.url)

    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_every_started_pod)
            summary = await world.dispatcher(rt).run()
            tg.cancel_scope.cancel()
    failed = world.events(JobFailed)
    assert summary.failed == 1 and len(failed) == 1
    assert failed[0].reason == "pod_lost" and "2 attempt" in failed[0].detail
    assert len(world.events(JobRequeued)) == 1
    assert len(world.events(JobAssigned)) == 2


async def test_stock_out_on_the_first_rung_uses_the_next(tmp_path: Path) -> None:
    provider = FakeProvider(stock_out={"A"})
    world = World(tmp_path, provider)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        summary = await world.dispatcher(rt).run()
        stockouts = rt.state(FleetProjection).stockouts
    assert summary.succeeded == 1
    failed = world.events(PodProvisionFailed)
    assert [(e.kind, e.gpu_type) for e in failed] == [("stock_out", "A")]
    assert [(e.gpu_type, e.rung) for e in world.events(PodRequested)] == [("A", 0), ("B", 1)]
    assert [gpu for _name, gpu in provider.creates] == ["B"]
    assert list(stockouts) == ["A"]
    # The stock-out released its reservation: nothing was billed for a pod that never existed.
    released = [e.reservation_id for e in world.events(CostReleased)]
    assert released == [world.events(PodRequested)[0].reservation_id]


async def test_every_rung_out_of_stock_waits_instead_of_spinning(tmp_path: Path) -> None:
    provider = FakeProvider(stock_out={"A", "B"})
    world = World(tmp_path, provider)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        with anyio.move_on_after(0.5):
            await world.dispatcher(rt).run()
    assert provider.attempts == ["A", "B"]  # one try per rung, then the cooldown holds


async def test_budget_cap_reached_launches_no_pod_and_says_so(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider, price_table=prices(A=1.0, B=1.0))  # a pod's first hour: $1
    async with world.runtime() as rt:
        await rt.emit(budget(run_usd=0.5))
        await queue_jobs(rt, world.blobs, 2)
        summary = await world.dispatcher(rt).run()
    assert summary.status == "budget" and summary.waiting == 2
    assert "run budget refused" in summary.message
    refused = world.events(CostRefused)
    assert len(refused) == 1 and refused[0].budget == "run" and refused[0].ref == "pod:p0"
    assert world.events(PodRequested) == [] and provider.creates == []


async def test_a_budget_for_one_pod_runs_every_job_on_that_pod(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider, price_table=prices(A=1.0, B=1.0))
    async with world.runtime() as rt:
        await rt.emit(budget(run_usd=1.5))
        await queue_jobs(rt, world.blobs, 3)
        summary = await world.dispatcher(rt).run()
        spent = rt.state(BudgetProjection)
    assert summary.succeeded == 3
    assert len(world.events(PodRequested)) == 1
    assert len(world.events(CostRefused)) == 1  # the second pod, once: no refusal storm
    assert spent.open == {} and spent.settled <= 1_500_000


async def test_gpu_time_is_reserved_in_chunks_and_settled_for_what_ran(tmp_path: Path) -> None:
    provider = FakeProvider()
    config = msgspec.structs.replace(FAST, reserve_s=0.2)
    world = World(
        tmp_path,
        provider,
        config=config,
        price_table=prices(A=36.0, B=36.0),  # $0.01 a second
        trainer=lambda: FakeInnerTrainer(seconds=0.6, steps=3),
    )
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        await world.dispatcher(rt).run()
        spent = rt.state(BudgetProjection)
        pod = rt.state(FleetProjection).pods["p0"]
    reserved = [e for e in world.events(CostReserved) if e.ref == "pod:p0"]
    settled = [e for e in world.events(CostSettled) if e.ref == "pod:p0"]
    assert len(reserved) >= 3 and len(settled) == len(reserved)  # rolled over while the job ran
    assert spent.open == {}
    billed = pod.ended_ts - pod.created_ts
    assert sum(e.usd for e in settled) == pytest.approx(0.01 * billed, abs=1e-6)


async def test_idle_pods_are_reaped_after_the_ttl(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider, config=msgspec.structs.replace(FAST, idle_ttl_s=0.2))
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        with anyio.move_on_after(3.0):
            async with anyio.create_task_group() as tg:
                tg.start_soon(world.dispatcher(rt, once=False).run)
                while not world.events(PodTerminated):
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
    assert [e.reason for e in world.events(PodTerminating)] == ["idle_ttl"]
    idle_from = next(r.ts for r in world.records() if isinstance(r.event, JobSucceeded))
    reaped_at = next(r.ts for r in world.records() if isinstance(r.event, PodTerminating))
    assert reaped_at - idle_from >= 0.2
    assert provider.live() == []


async def test_the_batch_policy_terminates_a_free_fallback_pod_at_once(tmp_path: Path) -> None:
    provider = FakeProvider()
    # Rung "A" off the warm rungs (none are warm): with nothing left waiting it goes without its 60 s TTL.
    config = msgspec.structs.replace(FAST, idle_policy="batch", warm_rungs=0)
    world = World(tmp_path, provider, config=config)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        with anyio.move_on_after(3.0):
            async with anyio.create_task_group() as tg:
                tg.start_soon(world.dispatcher(rt, once=False).run)
                while not world.events(PodTerminated):
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
    assert [e.reason for e in world.events(PodTerminating)] == ["no_work"]
    idle_from = next(r.ts for r in world.records() if isinstance(r.event, JobSucceeded))
    reaped_at = next(r.ts for r in world.records() if isinstance(r.event, PodTerminating))
    assert reaped_at - idle_from < 1.0  # well inside the TTL
    assert provider.live() == []


async def test_a_trainer_failure_fails_the_job_without_a_retry_and_keeps_the_pod(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider, trainer=lambda: FakeInnerTrainer(failure="oom"))
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 2)
        summary = await world.dispatcher(rt).run()
    assert summary.failed == 2
    assert {e.reason for e in world.events(JobFailed)} == {"oom"}
    assert world.events(JobRequeued) == [] and len(world.events(PodRequested)) <= 2


async def test_a_pod_whose_bootstrap_fails_is_terminated_and_replaced(tmp_path: Path) -> None:
    provider = FakeProvider(boot_polls=1000)  # never leaves PENDING
    config = msgspec.structs.replace(FAST, ready_timeout_s=0.2, max_pods=1)
    world = World(tmp_path, provider, config=config)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        with anyio.move_on_after(0.8):
            await world.dispatcher(rt).run()
        fleet = rt.state(FleetProjection)
    failures = world.events(PodProvisionFailed)
    assert failures and failures[0].kind == "bootstrap" and failures[0].provider_id
    assert fleet.pods["p0"].status == "gone" and provider.terminated[0] == failures[0].provider_id
    assert len(world.events(PodRequested)) >= 2  # a new pod, never the failed one again
    assert all(e.pod_id != "p0" for e in world.events(JobAssigned))


async def test_refused_credentials_stop_the_dispatcher_with_a_clear_error(tmp_path: Path) -> None:
    provider = FakeProvider()
    provider.fail_next.append(ProviderAuthError("RUNPOD_API_KEY was refused (401)"))
    world = World(tmp_path, provider)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        with pytest.raises(DispatcherFatal, match="RUNPOD_API_KEY"):
            await world.dispatcher(rt).run()


async def test_resume_adopts_the_runs_pods_and_terminates_orphans_only(tmp_path: Path) -> None:
    provider = FakeProvider()
    world = World(tmp_path, provider)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        await rt.emit(PodRequested(pod_id="p0", gpu_type="A", provider="fake"))  # crashed before its outcome
    adopted = provider.add(pod_name(RUN, "p0"))
    orphan = provider.add(pod_name(RUN, "p7"))
    other_run = provider.add(pod_name(RUN + "x", "p0"))
    async with world.runtime() as rt:
        summary = await world.dispatcher(rt).run()
    assert summary.succeeded == 1
    assert provider.creates == []  # the crashed launch was found by name, not repeated
    assert [e.pod_id for e in world.events(JobAssigned)] == ["p0"]
    assert [(e.pod_id, e.reason) for e in world.events(PodTerminating)] == [("p7", "orphan"), ("p0", "drained")]
    assert orphan.provider_id in provider.terminated and adopted.provider_id in provider.terminated
    assert provider.pods[other_run.provider_id].state is PodState.RUNNING  # another run's pod is not ours


async def test_resume_reconciles_a_running_job_instead_of_running_it_again(tmp_path: Path) -> None:
    provider = FakeProvider()
    trainers: list[FakeInnerTrainer] = []

    def trainer() -> FakeInnerTrainer:
        trainers.append(FakeInnerTrainer(seconds=0.4, steps=4))
        return trainers[-1]

    world = World(tmp_path, provider, trainer=trainer)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 2)
        async with anyio.create_task_group() as tg:  # the controller "dies" once both jobs are running
            tg.start_soon(world.dispatcher(rt).run)
            while len(world.events(JobStarted)) < 2:
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert rt.state(QueueProjection).counts == {"running": 2}
    async with world.runtime() as rt:
        summary = await world.dispatcher(rt).run()
        queue = rt.state(QueueProjection)
    assert summary.succeeded == 2 and {j.attempts for j in queue.jobs.values()} == {1}
    assert sorted(call.job_id for t in trainers for call in t.calls) == ["j0", "j1"]  # each ran once
    assert len(world.events(JobStarted)) == 2 and len(world.events(PodRequested)) == 2
    progress = [(e.job_id, e.cursor) for e in world.events(JobProgressed)]
    assert len(progress) == len(set(progress))  # no progress recorded twice across the restart
    check_invariants(world.records(), max_pods=FAST.max_pods)
    assert provider.live() == []


async def test_a_job_without_its_bundle_fails_with_a_reason(tmp_path: Path) -> None:
    world = World(tmp_path, FakeProvider())
    async with world.runtime() as rt:
        await rt.emit(JobQueued(job_id="j0", episode_id="e", family="f", base_model="m", bundle="0" * 64))
        summary = await world.dispatcher(rt).run()
    assert summary.failed == 1
    assert world.events(JobFailed)[0].reason == "bundle_unreadable"


async def test_live_state_equals_a_replay_of_the_log(tmp_path: Path) -> None:
    world = World(tmp_path, FakeProvider(stock_out={"A"}))
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 3)
        await world.dispatcher(rt).run()
        live = rt.state_hash()
    async with world.runtime() as rt:
        assert rt.state_hash() == live
    assert QueueProjection().fold(world.records()).counts == {"succeeded": 3}
    assert world.events(PodReady)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_pod_deaths_never_lose_or_duplicate_a_job(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    provider = FakeProvider()
    config = msgspec.structs.replace(FAST, max_pods=3, max_attempts=4)
    world = World(tmp_path, provider, trainer=lambda: FakeInnerTrainer(seconds=0.15, steps=3), config=config)
    kills: list[str] = []

    async def chaos() -> None:
        while len(kills) < 6:
            await anyio.sleep(rng.uniform(0.02, 0.2))
            pods = sorted(rt.state(FleetProjection).pods.values(), key=lambda p: p.pod_id)
            live = [p for p in pods if p.status in ("ready", "busy", "idle")]
            if live:
                victim = rng.choice(live)
                provider.kill(victim.provider_id)
                await world.agents.kill(victim.url)
                kills.append(victim.pod_id)

    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 8)
        async with anyio.create_task_group() as tg:
            tg.start_soon(chaos)
            summary = await world.dispatcher(rt).run()
            tg.cancel_scope.cancel()
        jobs = rt.state(QueueProjection).jobs
        assert rt.pending_requests() == []
    assert summary.waiting == 0 and summary.succeeded + summary.failed == 8
    check_invariants(world.records(), max_pods=3)
    for job in jobs.values():  # a job fails only because its pods kept dying, and only after its last attempt
        assert job.status == "succeeded" or (job.reason == "pod_lost" and job.attempts == 4)
    assert provider.live() == []


async def test_a_job_cut_short_says_so_before_its_outcome(tmp_path: Path) -> None:
    from events import JobStoppedEarly
    from handlers.ports.inner_trainer import JobResult

    cut = JobResult(
        job_id="", ok=True, pre=0.2, post=0.3, steps_done=4, steps_total=10, stop_reason="deadline", eval_n=200
    )
    full = msgspec.structs.replace(cut, steps_done=10, stop_reason="max_steps")
    for result, expect_stop in ((full, False), (cut, True)):
        world = World(tmp_path / str(expect_stop), FakeProvider(), trainer=lambda r=result: FakeInnerTrainer(result=r))
        async with world.runtime() as rt:
            await queue_jobs(rt, world.blobs, 1)
            await world.dispatcher(rt).run()
        kinds = [type(r.event).__name__ for r in world.records() if r.event.type.startswith("job.")]
        (ok,) = world.events(JobSucceeded)
        assert ok.metrics["eval_n"] == 200.0
        if not expect_stop:
            assert world.events(JobStoppedEarly) == []
            continue
        (stopped,) = world.events(JobStoppedEarly)
        assert stopped.line() == "stopped at step 4 of 10: deadline"
        assert kinds.index("JobStoppedEarly") == kinds.index("JobSucceeded") - 1
