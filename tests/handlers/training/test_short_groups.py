"""Groups closed short: a group still running at its last fresh step trains with the episodes it has (at least
``min_group_fraction`` of them), its stragglers are cancelled and counted as discarded; the decision is the
``group.closed_short`` event, so the projection and a resumed loop reproduce it."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Recorded
from events.learning import (
    BatchCollected,
    EpisodeStaleDiscarded,
    GroupClosedShort,
    GroupStarted,
    LoRAStepApplied,
)
from handlers.training import EpisodeGroup, FinishedEpisode, OuterLoop, SampledTurn, parse_config
from handlers.training.batch import TaskRef
from handlers.training.projection import TrainingProjection, TrainingState, open_groups
from handlers.training.step import build_batch_datums
from tests.fakes.learner import FakeLearner
from tests.fakes.outer import fake_episode_runner

STRAGGLER = "ep000001"  # the second episode of the first group: it never finishes by itself
CANCELLED = "cancelled"  # what the straggler's run_episode logs when it is cancelled


def _cfg_table(fraction: float) -> dict[str, object]:
    return {
        "group_size": 4,
        "tasks_per_batch": 1,
        "episode_concurrency": 8,
        "max_steps_off_policy": 1,
        "min_group_fraction": fraction,
    }


# group of 4 (closes short with 2), 1 task per batch, K = 1: group g000000 (v0) has its last fresh step at 1
CFG = parse_config(_cfg_table(0.5))


def fold(events: list[object]) -> TrainingState:
    return TrainingProjection().fold(Recorded(i, 0.0, e) for i, e in enumerate(events))  # type: ignore[arg-type]


def _turn() -> list[SampledTurn]:
    return [SampledTurn(prompt_tokens=[1, 2], sampled_tokens=[3], sampled_logprobs=[-0.3])]


def runner(log: list[object], started: list[str], *, slow: str = ""):
    """Episodes take 1-3 ms; the STRAGGLER never ends by itself; ``slow`` takes 50 ms."""

    async def run_episode(episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
        started.append(episode_id)
        delay = 0.05 if episode_id == slow else 0.001 * (1 + int(episode_id[2:]) % 3)
        try:
            await asyncio.sleep(3600 if episode_id == STRAGGLER else delay)
        except asyncio.CancelledError:
            log.append((CANCELLED, episode_id))
            raise
        return FinishedEpisode(
            episode_id=episode_id,
            task_id=task.task_id,
            sampler_version=version,
            reward=0.1 * len(started),
            turns=_turn(),
        )

    return run_episode


async def _first_run() -> tuple[list[object], list[str]]:
    events: list[object] = []
    started: list[str] = []

    async def emit(body: object) -> None:
        await asyncio.sleep(0)  # let a cancelled episode see its cancellation, as a real log write would
        events.append(body)

    loop = OuterLoop(config=CFG, learner=FakeLearner(prefix=""), run_episode=runner(events, started), emit=emit)
    assert await asyncio.wait_for(loop.run(max_steps=2), 10) == 2  # the straggler did not hold the run
    assert loop.closed_short == 1
    return events, started


async def test_a_group_at_its_last_fresh_step_trains_without_its_straggler() -> None:
    events, _ = await _first_run()
    short = [e for e in events if isinstance(e, GroupClosedShort)]
    assert short == [
        GroupClosedShort(
            group_id="g000000",
            step=1,
            episode_ids=["ep000000", "ep000002", "ep000003"],
            dropped_episode_ids=[STRAGGLER],
            task_id=short[0].task_id,
            sampler_version=0,
        )
    ]
    at = events.index(short[0])
    # the decision is recorded, then the straggler is cancelled, then the step collects the 3 it kept
    assert events[at + 1] == (CANCELLED, STRAGGLER)
    collected = [e for e in events if isinstance(e, BatchCollected)]
    assert collected[1].step == 1 and collected[1].episode_ids == short[0].episode_ids
    assert collected[1].staleness_max == 1
    trained = [i for c in collected for i in c.episode_ids]
    assert STRAGGLER not in trained and len(trained) == len(set(trained))
    s = fold(events)
    g = s.groups["g000000"]
    assert (g.status, g.step, g.dropped, g.members) == ("trained", 1, [STRAGGLER], short[0].episode_ids)
    assert s.short_groups == 1 and s.discarded_episodes == 1


def test_without_a_minimum_share_finished_the_group_waits_whole() -> None:
    """Negative: the same run with groups trained whole only (fraction 1.0) never closes a group short, so the
    never-ending straggler's group is discarded whole once stale instead."""
    events: list[object] = []
    cfg = parse_config(_cfg_table(1.0))

    async def emit(body: object) -> None:
        events.append(body)

    loop = OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=runner(events, []), emit=emit)
    assert asyncio.run(asyncio.wait_for(loop.run(max_steps=3), 10)) == 3
    assert not [e for e in events if isinstance(e, GroupClosedShort)]
    stale = {e.episode_id for e in events if isinstance(e, EpisodeStaleDiscarded)}
    assert {"ep000000", STRAGGLER, "ep000002", "ep000003"} <= stale  # the whole group, the finished 3 too
    assert fold(events).discarded_episodes >= 4


@pytest.mark.parametrize("crash_after", [GroupClosedShort, BatchCollected])
async def test_a_group_closed_short_is_trained_short_after_a_crash(crash_after: type) -> None:
    events, _ = await _first_run()
    decided = next(e for e in events if isinstance(e, GroupClosedShort))
    cut = next(i for i, e in enumerate(events) if isinstance(e, crash_after) and getattr(e, "step", -1) == 1)
    log = [e for e in events[: cut + 1] if not isinstance(e, tuple)]  # the markers are not events
    state = fold(log)
    assert state.step == 1 and state.short_groups == 1 and state.discarded_episodes == 1
    reopened = {g.group_id: g for g in open_groups(state)}
    assert reopened["g000000"].members == decided.episode_ids

    more: list[object] = []
    started: list[str] = []

    async def emit(body: object) -> None:
        more.append(body)

    # The straggler would hang again if re-run: it must not be. A kept member comes back last (50 ms), after a
    # newer whole group: the step still waits for it rather than closing the group short a second time.
    run = runner(more, started, slow="ep000002")
    loop = OuterLoop(config=CFG, learner=FakeLearner(prefix=""), run_episode=run, emit=emit, state=state)
    assert await asyncio.wait_for(loop.run(max_steps=2), 10) == 2
    assert STRAGGLER not in started and set(decided.episode_ids) <= set(started)
    assert not [e for e in more if isinstance(e, GroupClosedShort)]  # decided once, in the first process
    again = next(e for e in more if isinstance(e, BatchCollected))
    assert again.step == 1 and again.episode_ids == decided.episode_ids
    whole = fold(log + [e for e in more if not isinstance(e, tuple)])
    assert whole.groups["g000000"].status == "trained" and whole.discarded_episodes == 1
    assert [e.step for e in log + more if isinstance(e, LoRAStepApplied)] == [0, 1]


def test_advantages_are_over_the_episodes_present() -> None:
    eps = [
        FinishedEpisode(episode_id=f"e{i}", task_id="calc_chain:1", sampler_version=0, reward=r, turns=_turn())
        for i, r in enumerate([1.0, 0.0, 0.5])
    ]
    datums = build_batch_datums([EpisodeGroup(task_id="calc_chain:1", episodes=eps)])
    # one datum per episode; its sampled token carries reward - mean over the 3 present (0.5)
    assert [d.advantages[-1] for d in datums] == pytest.approx([0.5, -0.5, 0.0])


def test_projection_ignores_a_second_or_unknown_closing() -> None:
    g = GroupStarted(group_id="g000000", task_id="calc_chain:1", episode_ids=["a", "b", "c"], sampler_version=0)
    close = GroupClosedShort(group_id="g000000", step=2, episode_ids=["a", "b"], dropped_episode_ids=["c"])
    s = fold([g, close, close, GroupClosedShort(group_id="nope", step=2, episode_ids=[], dropped_episode_ids=["x"])])
    assert s.discarded_episodes == 1 and s.short_groups == 1 and open_groups(s)[0].members == ["a", "b"]
    # stale after closing short: only the members it kept are discarded (the straggler was counted already)
    s = fold([g, close, EpisodeStaleDiscarded(episode_id="a", sampler_version=0, step=3)])
    assert s.discarded_episodes == 3 and open_groups(s) == []


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 1000), k=st.integers(0, 2))
def test_projection_matches_the_live_loop_with_short_groups(seed: int, k: int) -> None:
    events: list[object] = []

    async def emit(body: object) -> None:
        events.append(body)

    cfg = parse_config(
        {
            "group_size": 4,
            "tasks_per_batch": 2,
            "episode_concurrency": 12,
            "max_steps_off_policy": k,
            "min_group_fraction": 0.5,
            "seed": seed,
        }
    )
    started: list[tuple[str, str, int, str]] = []
    run = fake_episode_runner(seed, started, tail_prob=0.15, straggle=40)
    loop = OuterLoop(config=cfg, learner=FakeLearner(prefix=""), run_episode=run, emit=emit)
    asyncio.run(asyncio.wait_for(loop.run(max_steps=5), 20))
    s = fold(events)
    assert (s.step, s.next_episode, s.draws, s.requeued) == (5, loop._episodes, loop._draws, loop.requeued)
    assert s.short_groups == loop.closed_short
    closed = [e for e in events if isinstance(e, GroupClosedShort)]
    dropped = {i for e in closed for i in e.dropped_episode_ids}
    stale = [e for e in events if isinstance(e, EpisodeStaleDiscarded)]
    assert s.discarded_episodes == len(stale) + len(dropped)
    trained = [i for e in events if isinstance(e, BatchCollected) for i in e.episode_ids]
    assert len(trained) == len(set(trained)) and not dropped & set(trained)
    assert all(len(e.episode_ids) >= 2 and e.step - e.sampler_version == k for e in closed)
    for e in closed:  # a short group trains at the step it was closed for, with exactly what it kept
        assert s.groups[e.group_id].status == "trained" and s.groups[e.group_id].step == e.step


async def test_an_episode_failing_while_cancelled_does_not_fail_the_run() -> None:
    """A straggler cancelled by the loop that raises on its way out (e.g. a budget hold settling twice) is
    cancelled, not an error of the run; the same error raised while not cancelled still fails it."""
    events: list[object] = []
    hang = runner(events, [])

    async def run_episode(episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
        try:
            return await hang(episode_id, task, version, path)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    async def emit(body: object) -> None:
        await asyncio.sleep(0)
        events.append(body)

    loop = OuterLoop(config=CFG, learner=FakeLearner(prefix=""), run_episode=run_episode, emit=emit)
    assert await asyncio.wait_for(loop.run(max_steps=2), 10) == 2
    assert (CANCELLED, STRAGGLER) in events and loop.closed_short == 1


async def test_the_episodes_dropped_for_good_are_handed_over_for_their_jobs_to_be_cancelled() -> None:
    """``drop_jobs`` hears of each episode dropped for good, once its task is told to stop: the straggler of a group
    closed short, the unfinished members of a missed group, and (a resumed loop asks again, which changes
    nothing) the stragglers of a group closed short by an earlier process. Never a trained episode."""
    events: list[object] = []

    async def emit(body: object) -> None:
        await asyncio.sleep(0)
        events.append(body)

    async def drop_jobs(episode_ids: list[str], reason: str) -> None:
        events.append(("drop", list(episode_ids), reason))

    loop = OuterLoop(
        config=CFG, learner=FakeLearner(prefix=""), run_episode=runner(events, []), emit=emit, drop_jobs=drop_jobs
    )
    await asyncio.wait_for(loop.run(max_steps=2), 10)
    drops = [e for e in events if isinstance(e, tuple) and e[0] == "drop"]
    assert drops == [("drop", [STRAGGLER], "straggler of group g000000, closed short at step 1")]
    closed = next(e for e in events if isinstance(e, GroupClosedShort))
    assert events.index(closed) < events.index(drops[0])  # the decision is in the log first

    # A missed group (whole groups only): the straggler is its one unfinished member.
    events.clear()
    whole_only = parse_config(_cfg_table(1.0))
    loop = OuterLoop(
        config=whole_only,
        learner=FakeLearner(prefix=""),
        run_episode=runner(events, []),
        emit=emit,
        drop_jobs=drop_jobs,
    )
    await asyncio.wait_for(loop.run(max_steps=3), 10)
    drops = [e for e in events if isinstance(e, tuple) and e[0] == "drop"]
    assert [d[1] for d in drops] == [[STRAGGLER]] and "g000000 missed its last fresh step" in drops[0][2]
    trained = {i for e in events if isinstance(e, BatchCollected) for i in e.episode_ids}
    assert STRAGGLER not in trained

    # Resumed after the decision: the dropped straggler is handed over again, and never re-run.
    first, _ = await _first_run()
    cut = next(i for i, e in enumerate(first) if isinstance(e, GroupClosedShort))
    state = fold([e for e in first[: cut + 1] if not isinstance(e, tuple)])
    events.clear()
    started: list[str] = []
    loop = OuterLoop(
        config=CFG,
        learner=FakeLearner(prefix=""),
        run_episode=runner(events, started),
        emit=emit,
        state=state,
        drop_jobs=drop_jobs,
    )
    await asyncio.wait_for(loop.run(max_steps=2), 10)
    assert ("drop", [STRAGGLER], "straggler of group g000000, closed short") in events
    assert STRAGGLER not in started
