"""Cancelling jobs (``job.cancel_requested``): a waiting job fails at once and is never assigned; a running one is
stopped on its pod, which takes the next job; a request recorded before a controller restart is carried out
after it. Fake provider, in-process pod agents, a fake inner trainer whose first job would run for a minute."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import msgspec
import pytest

from events import JobAssigned, JobCancelRequested, JobFailed, JobProgressed, JobStarted, JobSucceeded, PodRequested
from handlers.fleet.projection import FleetProjection
from handlers.fleet.queue import CANCELLED, QueueProjection
from tests.fakes.fleet import FakeProvider
from tests.fakes.inner import OneSlowJob
from tests.handlers.fleet.fleet_world import FAST, World, queue_jobs
from tests.handlers.fleet.test_dispatcher import check_invariants

pytestmark = pytest.mark.timeout(30)

ONE_POD = msgspec.structs.replace(FAST, max_pods=1)


def make_world(tmp_path: Path) -> tuple[World, list[OneSlowJob]]:
    trainers: list[OneSlowJob] = []

    def trainer() -> OneSlowJob:
        trainers.append(OneSlowJob("j0"))
        return trainers[-1]

    return World(tmp_path, FakeProvider(), trainer=trainer, config=ONE_POD), trainers


async def test_a_waiting_job_whose_cancel_was_requested_fails_at_once_and_is_never_assigned(tmp_path: Path) -> None:
    world, _ = make_world(tmp_path)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 3, start=1)  # j1, j2, j3: none of them is the minute-long j0
        await rt.emit(JobCancelRequested(job_id="j2", reason="straggler of group g-1"))
        summary = await world.dispatcher(rt).run()
        queue = rt.state(QueueProjection)
    assert (summary.status, summary.succeeded, summary.failed) == ("drained", 2, 1)
    [failed] = world.events(JobFailed)
    assert (failed.job_id, failed.reason, failed.detail, failed.key) == ("j2", CANCELLED, "straggler of group g-1", "")
    assert "j2" not in {e.job_id for e in world.events(JobAssigned)}
    assert queue.cancels == {} and queue.jobs["j2"].status == "failed"
    check_invariants(world.records(), max_pods=1)


async def test_a_running_job_is_stopped_on_its_pod_which_then_runs_the_next_job(tmp_path: Path) -> None:
    world, trainers = make_world(tmp_path)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 2)  # j0 (a minute) and j1, on one pod
        async with anyio.create_task_group() as tg:

            async def cancel_j0_once_it_trains() -> None:
                while not any(e.job_id == "j0" for e in world.events(JobProgressed)):
                    await anyio.sleep(0.01)
                await rt.emit(JobCancelRequested(job_id="j0", reason="group g-0 missed its last fresh step"))

            tg.start_soon(cancel_j0_once_it_trains)
            began = time.monotonic()
            summary = await world.dispatcher(rt).run()
            took = time.monotonic() - began
        fleet = rt.state(FleetProjection)
    assert (summary.succeeded, summary.failed) == (1, 1) and took < 20  # j0 alone would take 60 s
    [failed] = world.events(JobFailed)
    assert (failed.job_id, failed.reason, failed.pod_id, failed.attempt) == ("j0", CANCELLED, "p0", 1)
    assert failed.key and failed.key == world.events(JobAssigned)[0].key  # the attempt's own outcome
    assert [e.job_id for e in world.events(JobSucceeded)] == ["j1"]
    assert [(e.job_id, e.pod_id) for e in world.events(JobAssigned)] == [("j0", "p0"), ("j1", "p0")]
    assert len(world.events(PodRequested)) == 1 and fleet.pods["p0"].status == "gone"
    assert trainers[0].finished == ["j1"]  # j0's run on the pod ended without a result
    check_invariants(world.records(), max_pods=1)


async def test_a_cancel_recorded_before_a_controller_restart_is_carried_out_after_it(tmp_path: Path) -> None:
    world, trainers = make_world(tmp_path)
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        async with anyio.create_task_group() as tg:  # the controller "dies" while j0 trains
            tg.start_soon(world.dispatcher(rt).run)
            while not world.events(JobStarted):
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        await rt.emit(JobCancelRequested(job_id="j0", reason="straggler"))
    async with world.runtime() as rt:
        assert rt.state(QueueProjection).cancels == {"j0": "straggler"}
        summary = await world.dispatcher(rt).run()
        queue = rt.state(QueueProjection)
    assert (summary.succeeded, summary.failed) == (0, 1) and queue.jobs["j0"].status == "failed"
    assert [e.reason for e in world.events(JobFailed)] == [CANCELLED]
    assert len(world.events(JobStarted)) == 1 and len(trainers[0].calls) == 1  # stopped, not started again
    check_invariants(world.records(), max_pods=1)
