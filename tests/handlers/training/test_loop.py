from __future__ import annotations

import asyncio

import pytest

from events.learning import (
    BatchCollected,
    BatchStarted,
    EpisodeStaleDiscarded,
    LoRAStepApplied,
    SamplerPublished,
)
from handlers.training import FinishedEpisode, OuterLoop, SampledTurn, parse_config
from tests.fakes.learner import FakeLearner
from tests.fakes.outer import fake_episode_runner


def make_runner(seed, tail_prob, started):
    # heavy-tailed durations (ms scale): a few stragglers take 30x longer
    return fake_episode_runner(seed, started, tail_prob=tail_prob, unit_s=0.002, straggle=30)


@pytest.mark.parametrize(("seed", "k", "tail"), [(0, 2, 0.05), (1, 0, 0.2), (2, 1, 0.1)])
async def test_async_loop_invariants(seed, k, tail):
    events = []

    async def emit(body):
        events.append(body)

    cfg = parse_config(
        {"group_size": 2, "tasks_per_batch": 3, "episode_concurrency": 8, "max_steps_off_policy": k, "seed": seed}
    )
    started = []
    loop = OuterLoop(
        config=cfg, learner=FakeLearner(delay=0.003), run_episode=make_runner(seed, tail, started), emit=emit
    )
    assert await asyncio.wait_for(loop.run(max_steps=6), 20) == 6

    applied = [e for e in events if isinstance(e, LoRAStepApplied)]
    assert [a.step for a in applied] == list(range(6))
    collected = [e for e in events if isinstance(e, BatchCollected)]
    assert all(c.staleness_max <= k for c in collected)
    assert all(len(c.episode_ids) == 6 and len(set(c.task_ids)) <= 3 for c in collected)
    trained = [i for c in collected for i in c.episode_ids]
    assert len(trained) == len(set(trained))  # no episode trained twice
    discarded = {e.episode_id for e in events if isinstance(e, EpisodeStaleDiscarded)}
    assert not discarded & set(trained)
    # every episode ran on the sampler published before it started, and with its path
    published = {e.sampler_version: e.path for e in events if isinstance(e, SamplerPublished)}
    published[0] = ""
    assert all(published[v] == p for _, _, v, p in started)
    # stale tasks were run again, or (discarded just before the last step: no group starts during a learner
    # step) wait at the head of the task queue for the next run
    queued = [t.task_id for t in loop._queue]
    for tid in loop.requeued:
        assert sum(1 for _, t, _, _ in started if t == tid) >= 2 * cfg.group_size or tid in queued
    assert all("triage" not in t for e in events if isinstance(e, BatchStarted) for t in e.task_ids)


async def test_one_straggler_does_not_gate_a_batch():
    events = []

    async def emit(body):
        events.append(body)

    async def run_episode(episode_id, task, version, path):
        if episode_id == "ep000000":
            await asyncio.sleep(3600)  # never finishes within the test
        await asyncio.sleep(0.001)
        return FinishedEpisode(
            episode_id=episode_id,
            task_id=task.task_id,
            sampler_version=version,
            reward=0.5,
            turns=[SampledTurn(prompt_tokens=[1], sampled_tokens=[2], sampled_logprobs=[-1.0])],
        )

    cfg = parse_config({"group_size": 2, "tasks_per_batch": 2, "episode_concurrency": 8})
    loop = OuterLoop(config=cfg, learner=FakeLearner(delay=0.0), run_episode=run_episode, emit=emit)
    assert await asyncio.wait_for(loop.run(max_steps=3), 10) == 3  # and the straggler was cancelled


async def test_episode_error_propagates():
    async def emit(body):
        pass

    async def run_episode(episode_id, task, version, path):
        raise RuntimeError("boom")

    cfg = parse_config({"group_size": 2, "tasks_per_batch": 1, "episode_concurrency": 2})
    loop = OuterLoop(config=cfg, learner=FakeLearner(delay=0.0), run_episode=run_episode, emit=emit)
    with pytest.raises(ExceptionGroup):
        await asyncio.wait_for(loop.run(max_steps=1), 10)


def test_concurrency_must_hold_a_group():
    from handlers.training import ConfigError

    with pytest.raises(ConfigError, match="episode_concurrency"):
        parse_config({"group_size": 8, "episode_concurrency": 4})


async def test_synchronous_steps_do_not_depend_on_timing():
    """K = 0 with room for a whole batch (the CPU replica's setting): whatever order the episodes finish in,
    every episode samples the sampler of the step that trains it, nothing is discarded, and the learner gets the
    same datums in the same order (groups in the order they started, not the order they finished)."""

    async def run(timing_seed: int) -> tuple[list[list[str]], list[list[tuple[int, ...]]], int]:
        import random

        rng = random.Random(timing_seed)
        events = []

        async def emit(body):
            events.append(body)

        async def run_episode(episode_id, task, version, path):
            await asyncio.sleep(rng.random() * 0.004)
            n = int(episode_id[2:])
            return FinishedEpisode(
                episode_id=episode_id,
                task_id=task.task_id,
                sampler_version=version,
                reward=(n * 7919 % 13) / 13,  # the episode's, not the timing's
                turns=[SampledTurn(prompt_tokens=[1, n], sampled_tokens=[n + 2], sampled_logprobs=[-0.5])],
            )

        cfg = parse_config(
            {"group_size": 2, "tasks_per_batch": 3, "episode_concurrency": 6, "max_steps_off_policy": 0, "seed": 4}
        )
        learner = FakeLearner()
        loop = OuterLoop(config=cfg, learner=learner, run_episode=run_episode, emit=emit)
        assert await asyncio.wait_for(loop.run(max_steps=4), 20) == 4
        collected = [e for e in events if isinstance(e, BatchCollected)]
        assert all(c.staleness_max == 0 for c in collected)
        discarded = sum(isinstance(e, EpisodeStaleDiscarded) for e in events)
        datums = [[tuple(d.input_tokens) + tuple(d.advantages) for d in step[0]] for step in learner.steps]
        return [c.episode_ids for c in collected], datums, discarded

    first, second = await run(0), await run(1)
    assert first == second and first[2] == 0
    assert first[0][1] == ["ep000006", "ep000007", "ep000008", "ep000009", "ep000010", "ep000011"]
