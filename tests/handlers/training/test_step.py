from __future__ import annotations

import pytest

from events.learning import BatchCollected, EpisodeStaleDiscarded, LoRAStepApplied, SamplerPublished
from handlers.training import (
    EpisodeGroup,
    FinishedEpisode,
    SampledTurn,
    learner_step,
    parse_config,
    split_by_staleness,
)
from tests.fakes.learner import FakeLearner


def group(task, version, rewards):
    eps = [
        FinishedEpisode(
            episode_id=f"{task}-e{i}",
            task_id=task,
            sampler_version=version,
            reward=r,
            turns=[SampledTurn(prompt_tokens=[1, 2], sampled_tokens=[3, 4], sampled_logprobs=[-0.1, -0.2])],
        )
        for i, r in enumerate(rewards)
    ]
    return EpisodeGroup(task_id=task, episodes=eps)


@pytest.mark.parametrize(
    ("step", "version", "k", "fresh"), [(2, 0, 2, True), (3, 0, 2, False), (5, 5, 0, True), (6, 5, 0, False)]
)
def test_staleness_bound(step, version, k, fresh):
    split = split_by_staleness([group("t", version, [0, 1])], step, k)
    assert (len(split.fresh), len(split.stale)) == ((1, 0) if fresh else (0, 1))


def test_sampler_from_the_future_is_an_error():
    with pytest.raises(ValueError):
        split_by_staleness([group("t", 4, [0, 1])], 3, 2)


def test_group_is_as_stale_as_its_stalest_member():
    g = group("t", 3, [0, 1])
    g = EpisodeGroup(
        task_id="t", episodes=[g.episodes[0], FinishedEpisode(**{**_fields(g.episodes[1]), "sampler_version": 0})]
    )
    assert split_by_staleness([g], 3, 2).stale == [g]


def _fields(ep):
    return {f: getattr(ep, f) for f in ep.__struct_fields__}


async def test_step_trains_fresh_groups_and_requeues_stale():
    events = []

    async def emit(body):
        events.append(body)

    cfg = parse_config({"loss_fn": "ppo", "max_steps_off_policy": 2, "learning_rate": 1e-4})
    learner = FakeLearner(loss=1.5)
    res = await learner_step(
        learner,
        [group("a", 3, [1.0, 0.0]), group("b", 0, [0.5, 0.5]), group("c", 2, [0.0, 0.0, 1.0])],
        step=3,
        config=cfg,
        emit=emit,
    )
    assert res.requeued_task_ids == ["b"]
    kinds = [type(e) for e in events]
    assert kinds == [EpisodeStaleDiscarded, EpisodeStaleDiscarded, BatchCollected, LoRAStepApplied, SamplerPublished]
    assert {e.episode_id for e in events[:2]} == {"b-e0", "b-e1"}
    collected = events[2]
    assert collected.task_ids == ["c", "a"]  # oldest sampler first
    assert collected.staleness_max == 1
    [(datums, loss, loss_cfg, lr)] = learner.steps
    assert loss == "ppo" and loss_cfg == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2} and lr == 1e-4
    # group c rewards [0, 0, 1] -> advantages [-1/3, -1/3, 2/3]; group a [0.5, -0.5]
    advs = sorted(round(d.advantages[-1], 6) for d in datums)
    assert advs == sorted([-0.333333, -0.333333, 0.666667, 0.5, -0.5])
    applied = events[3]
    assert applied.step == 3 and applied.n_episodes == 5 and applied.n_tokens == 10
    assert applied.metrics == {"loss:sum": 1.5} and applied.state_path.endswith("step_000004")
    assert events[4].sampler_version == 4 and events[4].path == applied.sampler_path


async def test_all_stale_means_no_step():
    events = []

    async def emit(body):
        events.append(body)

    learner = FakeLearner(loss=1.5)
    res = await learner_step(learner, [group("a", 0, [1, 0])], step=5, config=parse_config({}), emit=emit)
    assert res.applied is None and res.requeued_task_ids == ["a"]
    assert learner.steps == [] and all(isinstance(e, EpisodeStaleDiscarded) for e in events)


async def test_save_every_controls_state_checkpoints():
    async def emit(body):
        pass

    learner = FakeLearner(loss=1.5)
    cfg = parse_config({"save_every": 2})
    for s in range(4):
        await learner_step(learner, [group("a", s, [1, 0])], step=s, config=cfg, emit=emit)
    assert [w for _, w in learner.saves] == [False, True, False, True]
