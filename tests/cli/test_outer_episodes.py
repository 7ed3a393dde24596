"""The outer loop's episodes (cli/outer_episodes.py): an episode dropped for good has its jobs cancelled, and the
fleet stops them."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from cli.outer_episodes import OuterEpisodes
from cli.train_config import load_run_config
from engine.log import read_log
from engine.runtime import Runtime
from events import JobCancelRequested, JobFailed, JobQueued, JobSucceeded
from handlers.episode.bundle import make_bundle
from handlers.fleet.queue import CANCELLED, FINAL, QueueProjection
from handlers.training import FinishedEpisode, OuterLoop, SampledTurn, parse_config
from handlers.training.batch import TaskRef
from tests.fakes.fleet import FakeProvider
from tests.fakes.inner import OneSlowJob
from tests.fakes.learner import FakeLearner
from tests.handlers.fleet.fleet_world import FAST, World

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"
STRAGGLER = "ep000001"  # the second episode of the first group: its job would train for a minute


def queued(job_id: str, episode_id: str) -> JobQueued:
    return JobQueued(job_id=job_id, episode_id=episode_id, family="calc_chain", base_model="m", bundle="b")


async def _no_policy(*_: Any) -> Any:
    raise AssertionError("no episode runs here")


async def test_dropping_episodes_requests_a_cancel_for_each_of_their_unfinished_jobs_once(tmp_path: Path) -> None:
    async with Runtime(tmp_path / "run", [QueueProjection()], durability="none") as rt:
        for job_id, episode_id in [("job-e1", "e1"), ("e2-job-1", "e2"), ("e2-job-2", "e2"), ("job-e3", "e3")]:
            await rt.emit(queued(job_id, episode_id))
        await rt.emit(JobSucceeded(job_id="e2-job-1", pre=0.1, post=0.2, train_seconds=1.0))
        cfg = load_run_config(SMOKE)
        episodes = OuterEpisodes(rt, cfg, policy_for=_no_policy, validator=None, gate=None)  # type: ignore[arg-type]
        await episodes.drop_jobs(["e1", "e2"], "straggler of group g000001, closed short at step 3")
        await episodes.drop_jobs(["e2"], "asked again")  # a resumed loop asks again: nothing new
        cancels = rt.state(QueueProjection).cancels
    asked = [r.event for r in read_log(tmp_path / "run" / "events.jsonl").records]
    assert [e.job_id for e in asked if isinstance(e, JobCancelRequested)] == ["e2-job-2", "job-e1"]  # once each
    assert cancels == {
        "job-e1": "straggler of group g000001, closed short at step 3",
        "e2-job-2": "straggler of group g000001, closed short at step 3",
    }  # not the finished job, not another episode's


async def test_a_stragglers_job_is_stopped_on_its_pod_while_the_run_goes_on(tmp_path: Path) -> None:
    """The whole chain in one process: the real loop closes a group short, ``drop_jobs`` records the cancel, the
    real dispatcher stops the straggler's job on its (in-process) pod. The straggler's job would train for a
    minute; each other job at once."""
    slow = functools.partial(OneSlowJob, f"job-{STRAGGLER}")
    world = World(tmp_path, FakeProvider(), trainer=slow, config=msgspec.structs.replace(FAST, max_pods=2))
    cfg = parse_config(
        {"group_size": 4, "tasks_per_batch": 1, "episode_concurrency": 8, "max_steps_off_policy": 1}
        | {"min_group_fraction": 0.5}
    )
    async with world.runtime() as rt:

        async def run_episode(episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
            job_id = f"job-{episode_id}"
            bundle = world.blobs.put(make_bundle({"job.toml": f"# {episode_id}\n".encode()}, b"{}"))
            await rt.emit(
                JobQueued(job_id=job_id, episode_id=episode_id, family="calc_chain", base_model="tiny", bundle=bundle)
            )
            await rt.wait_until(lambda: rt.state(QueueProjection).jobs[job_id].status in FINAL)
            turns = [SampledTurn(prompt_tokens=[1, 2], sampled_tokens=[3], sampled_logprobs=[-0.3])]
            return FinishedEpisode(
                episode_id=episode_id, task_id=task.task_id, sampler_version=version, reward=0.5, turns=turns
            )

        episodes = OuterEpisodes(rt, load_run_config(SMOKE), policy_for=_no_policy, validator=None, gate=None)  # type: ignore[arg-type]
        loop = OuterLoop(
            config=cfg,
            learner=FakeLearner(prefix=""),
            run_episode=run_episode,
            emit=rt.emit,
            drop_jobs=episodes.drop_jobs,
        )
        began = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(world.dispatcher(rt, once=False).run)
            assert await loop.run(max_steps=2) == 2
            await rt.wait_until(lambda: rt.state(QueueProjection).jobs[f"job-{STRAGGLER}"].status in FINAL)
            tg.cancel_scope.cancel()
        took = time.monotonic() - began
    asked = world.events(JobCancelRequested)
    assert [(e.job_id, e.reason) for e in asked] == [
        (f"job-{STRAGGLER}", "straggler of group g000000, closed short at step 1")
    ]
    [failed] = world.events(JobFailed)
    assert (failed.job_id, failed.reason) == (f"job-{STRAGGLER}", CANCELLED) and failed.pod_id and failed.key
    assert took < 20  # the straggler's job alone would have run 60 s
    assert f"job-{STRAGGLER}" not in {e.job_id for e in world.events(JobSucceeded)}
