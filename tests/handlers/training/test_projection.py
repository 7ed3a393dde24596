"""The training projection folds exactly the state the live loop keeps, so a loop built from it carries on:
ids continue past every id handed out, the task queue picks up where it was, open groups are re-launched with
their recorded ids and sampler, and no episode trains twice across the restart."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Recorded
from events.learning import BatchCollected, EpisodeStaleDiscarded, GroupStarted, LoRAStepApplied, SamplerPublished
from handlers.training import OuterLoop, parse_config
from handlers.training.batch import TaskRef
from handlers.training.projection import TrainingProjection, TrainingState, open_groups
from tests.fakes.learner import FakeLearner
from tests.fakes.outer import Started, fake_episode_runner


def fold(events: list[object]) -> TrainingState:
    return TrainingProjection().fold(Recorded(i, 0.0, e) for i, e in enumerate(events))  # type: ignore[arg-type]


def runner(seed: int, started: Started):
    return fake_episode_runner(seed, started)


def test_task_ids_parse_back() -> None:
    t = TaskRef(family="calc_chain", index=17)
    assert TaskRef.parse(t.task_id) == t
    # "²" is a digit to str.isdigit() that int() refuses; "٣" one int() takes, which would not print back the same
    for bad in ("calc_chain", "calc_chain:x", ":3", "calc_chain:²", "calc_chain:٣"):
        with pytest.raises(ValueError, match="expected FAMILY:INDEX") as caught:
            TaskRef.parse(bad)
        assert repr(bad) in str(caught.value)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 1000), k=st.integers(0, 2), steps=st.integers(1, 4))
def test_projection_matches_the_live_loop(seed: int, k: int, steps: int) -> None:
    events: list[object] = []

    async def emit(body: object) -> None:
        events.append(body)

    cfg = parse_config(
        {"group_size": 2, "tasks_per_batch": 2, "episode_concurrency": 6, "max_steps_off_policy": k, "seed": seed}
    )
    started: list[tuple[str, str, int, str]] = []
    loop = OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=runner(seed, started), emit=emit)
    asyncio.run(asyncio.wait_for(loop.run(max_steps=steps), 20))
    s = fold(events)
    assert s.step == loop.step == steps
    assert s.sampler_version == loop.version and s.sampler_path == loop.sampler_path
    assert s.next_episode == loop._episodes and s.draws == loop._draws
    # The log's queue may still hold tasks the loop popped for groups cancelled before their group.started:
    # a resumed loop pops them again. Otherwise the two agree.
    live = [t.task_id for t in loop._queue]
    assert s.queue[len(s.queue) - len(live) :] == live
    assert len(s.queue) - len(live) <= cfg.episode_concurrency // cfg.group_size
    assert s.requeued == loop.requeued
    assert s.resume_state_path == f"s/step_{steps:06d}"
    # every started episode belongs to exactly one group.started, ids unique
    announced = [i for e in events if isinstance(e, GroupStarted) for i in e.episode_ids]
    assert len(announced) == len(set(announced)) and {e for e, *_ in started} <= set(announced)
    trained = {i for e in events if isinstance(e, BatchCollected) for i in e.episode_ids}
    assert all(s.groups[s.episodes[i].group_id].status == "trained" for i in trained)
    discarded = {e.episode_id for e in events if isinstance(e, EpisodeStaleDiscarded)}
    assert all(s.groups[s.episodes[i].group_id].status == "discarded" for i in discarded)


async def test_a_loop_resumed_from_the_log_continues_without_repeating_ids() -> None:
    events: list[object] = []

    async def emit(body: object) -> None:
        events.append(body)

    cfg = parse_config({"group_size": 2, "tasks_per_batch": 2, "episode_concurrency": 6, "max_steps_off_policy": 1})
    first: list[tuple[str, str, int, str]] = []
    await asyncio.wait_for(
        OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=runner(1, first), emit=emit).run(max_steps=2),
        20,
    )
    state = fold(events)
    reopened = open_groups(state)  # groups still running when the first process stopped
    second: list[tuple[str, str, int, str]] = []
    loop = OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=runner(2, second), emit=emit, state=state)
    assert await asyncio.wait_for(loop.run(max_steps=4), 20) == 4
    # re-launched groups ran with their recorded ids and sampler; new ids start past every old one
    relaunched = {(i, g.sampler_version, g.sampler_path) for g in reopened for i in g.episode_ids}
    assert relaunched <= {(e, v, p) for e, _, v, p in second}
    old = {e for g in fold(events[: len(events)]).groups.values() for e in g.episode_ids if g.group_id}
    new_ids = [e for e, *_ in second if e not in {i for i, *_ in relaunched}]
    assert not set(new_ids) & {e for e, *_ in first}
    assert len(old) == len(set(old))
    applied = [e.step for e in events if isinstance(e, LoRAStepApplied)]
    assert applied == [0, 1, 2, 3]
    trained = [i for e in events if isinstance(e, BatchCollected) for i in e.episode_ids]
    assert len(trained) == len(set(trained))


async def test_a_step_applied_but_not_published_is_published_on_resume() -> None:
    events: list[object] = []

    async def emit(body: object) -> None:
        events.append(body)

    cfg = parse_config({"group_size": 2, "tasks_per_batch": 1, "episode_concurrency": 2})
    await OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=runner(0, []), emit=emit).run(max_steps=1)
    cut = next(i for i, e in enumerate(events) if isinstance(e, SamplerPublished))
    state = fold(events[:cut])  # the crash came between lora.step_applied and sampler.published
    assert state.step == 1 and state.sampler_version == 0
    more: list[object] = []

    async def emit2(body: object) -> None:
        more.append(body)

    loop = OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=runner(0, []), emit=emit2, state=state)
    assert await loop.run(max_steps=1) == 1
    assert more == [SamplerPublished(sampler_version=1, path="w/step_000001", step=0)]


def test_collected_but_unapplied_groups_stay_open() -> None:
    g = GroupStarted(
        group_id="g000000", task_id="calc_chain:1", episode_ids=["ep000000", "ep000001"], sampler_version=0
    )
    s = fold([g, BatchCollected(step=0, episode_ids=["ep000000", "ep000001"])])
    assert [x.group_id for x in open_groups(s)] == ["g000000"] and s.step == 0
    s = fold([g, BatchCollected(step=0, episode_ids=["ep000000", "ep000001"]), LoRAStepApplied(step=0, state_path="x")])
    assert open_groups(s) == [] and s.step == 1 and s.resume_state_path == "x"
