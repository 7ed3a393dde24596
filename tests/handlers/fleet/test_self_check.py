"""The dispatcher and the pods' self-check, in process: a pod is ready only once its check passed; a pod that
failed only its GPU check (a bad host) is replaced, any other failure stops launching (the image is wrong)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.pod.inproc import InProcessAgents
from events import JobAssigned, PodProvisionFailed, PodReady, PodSelfChecked, PodTerminated
from handlers.fleet.projection import FleetProjection
from handlers.ports.pod_agent import SelfCheck, SelfCheckItem
from tests.fakes.fleet import FakeProvider
from tests.fakes.inner import FakeInnerTrainer
from tests.handlers.fleet.fleet_world import World, queue_jobs

pytestmark = pytest.mark.timeout(30)

GOOD = SelfCheck(items=[SelfCheckItem(name="gpu", ok=True, detail="1 x A5000")])
NO_GPU = SelfCheck(items=[SelfCheckItem(name="gpu", ok=False, detail="0 GPU(s) visible, the trainer needs 1")])


async def test_a_host_without_its_gpu_is_replaced_and_the_job_runs_on_the_next_pod(tmp_path: Path) -> None:
    world = World(tmp_path, FakeProvider())
    # The first pod's host has lost its GPU; every later pod is fine.
    world.agents = InProcessAgents(
        FakeInnerTrainer, tmp_path / "agents", self_check=lambda url: lambda: NO_GPU if url == "fake://fp-0" else GOOD
    )
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        summary = await world.dispatcher(rt).run()
        fleet = rt.state(FleetProjection)
    assert summary.succeeded == 1 and summary.status == "drained"
    checked = world.events(PodSelfChecked)
    assert [(e.pod_id, e.ok, e.failed()) for e in checked] == [("p0", False, ["gpu"]), ("p1", True, [])]
    assert [(e.pod_id, e.kind) for e in world.events(PodProvisionFailed)] == [("p0", "self_check")]
    assert [e.pod_id for e in world.events(PodReady)] == ["p1"]
    assert {e.pod_id for e in world.events(JobAssigned)} == {"p1"}
    assert "p0" in {e.pod_id for e in world.events(PodTerminated)}
    assert (fleet.pods["p0"].self_check, fleet.pods["p1"].self_check) == ("failed: gpu", "passed")


async def test_agents_without_a_check_write_no_self_check_event(tmp_path: Path) -> None:
    world = World(tmp_path, FakeProvider())  # the CPU trainer's and the stand-in's case: nothing is checked
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 1)
        summary = await world.dispatcher(rt).run()
    assert summary.succeeded == 1
    assert world.events(PodSelfChecked) == [] and len(world.events(PodReady)) == 1
