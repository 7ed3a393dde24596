"""The pod agent's self-check gate (AgentCore, no HTTP): no job before the check has passed, what it reports."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import anyio
import pytest

from adapters.pod.core import AgentCore
from adapters.pod.trainers import UnavailableTrainer
from handlers.episode.bundle import make_bundle
from handlers.ports.inner_trainer import JobBundle
from handlers.ports.pod_agent import AgentNotReady, JobSubmission, SelfCheck, SelfCheckItem
from tests.fakes.inner import FakeInnerTrainer

pytestmark = pytest.mark.timeout(20)

BUNDLE = make_bundle({"job.toml": b"[prime_rl]\n"}, b"{}")
JOB = JobSubmission(job_id="j0", family="calc_chain")


async def settled(core: AgentCore) -> SelfCheck:
    with anyio.fail_after(5):
        while core.self_check.state == "pending":
            await asyncio.sleep(0.01)
    return core.self_check


async def test_without_a_check_the_agent_is_ready_at_once_and_runs_nothing(tmp_path: Path) -> None:
    core = AgentCore(FakeInnerTrainer(), tmp_path)
    core.start_self_check()
    assert core.health().self_check == SelfCheck(state="passed")
    assert (await core.submit(JOB, BUNDLE)).created
    await core.close()


async def test_no_job_is_taken_while_the_check_runs_then_it_is(tmp_path: Path) -> None:
    release = threading.Event()

    def slow() -> SelfCheck:
        release.wait(5)
        time.sleep(0.01)  # the thread may first run after the release: the check still takes measurable time
        return SelfCheck(items=[SelfCheckItem(name="gpu", ok=True, detail="1 x H100")])

    core = AgentCore(FakeInnerTrainer(), tmp_path, self_check=slow)
    core.start_self_check()
    assert core.health().self_check.state == "pending"
    with pytest.raises(AgentNotReady, match="self-check is still running"):
        await core.submit(JOB, BUNDLE)
    release.set()
    check = await settled(core)
    assert check.state == "passed" and check.summary() == "gpu: 1 x H100" and check.duration_s > 0
    assert (await core.submit(JOB, BUNDLE)).created
    await core.close()


async def test_a_check_that_crashes_or_reports_a_failure_keeps_the_pod_closed(tmp_path: Path) -> None:
    def broken() -> SelfCheck:
        raise RuntimeError("nvidia-smi hung")

    core = AgentCore(FakeInnerTrainer(), tmp_path / "a", self_check=broken)
    core.start_self_check()
    check = await settled(core)
    assert check.state == "failed" and check.summary() == "self_check: RuntimeError: nvidia-smi hung"
    with pytest.raises(AgentNotReady, match="self_check: RuntimeError"):
        await core.submit(JOB, BUNDLE)

    # A check whose items disagree with its state: the items decide.
    lying = SelfCheck(state="passed", items=[SelfCheckItem(name="vllm", ok=False, detail="0.25.1")])
    core2 = AgentCore(FakeInnerTrainer(), tmp_path / "b", self_check=lambda: lying)
    core2.start_self_check()
    assert (await settled(core2)).state == "failed"
    await core.close()
    await core2.close()


async def test_an_unavailable_trainer_fails_a_job_with_its_reason() -> None:
    trainer = UnavailableTrainer("prime_rl", "needs 1 or 2 GPUs, found 0")

    async def progress(_: object) -> None:
        return None

    result = await trainer.run(JobBundle(job_id="j", family="f", root="/nonexistent"), progress)
    assert not result.ok and result.detail == "trainer unavailable: needs 1 or 2 GPUs, found 0"
