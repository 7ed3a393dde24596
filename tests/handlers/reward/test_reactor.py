"""The reward reactor: one reward per finished episode, from the episode, its job and the frozen baseline."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine.runtime import Runtime
from events import (
    BaselineFrozen,
    EpisodeFinished,
    EpisodeStarted,
    Event,
    JobFailed,
    JobQueued,
    JobSucceeded,
    SubmissionReceived,
    SubmissionValidated,
)
from handlers.registry import default_projections
from handlers.reward.projection import RewardsProjection
from handlers.reward.reactor import RewardReactor


def _episode(ep: str, *, attempts: int, validated: bool, parseable: bool = True) -> list[Event]:
    out: list[Event] = [EpisodeStarted(episode_id=ep, task_id="t", family="calc_chain", policy="p")]
    for a in range(1, attempts + 1):
        out.append(SubmissionReceived(episode_id=ep, attempt=a, parseable=parseable))
    if validated:
        out.append(SubmissionValidated(episode_id=ep, attempt=attempts, checks=[], probe_seconds=1.0))
    out.append(EpisodeFinished(episode_id=ep, status="validated" if validated else "rejected"))
    return out


async def _run(tmp_path: Path, events: list[Event]) -> dict[str, object]:
    async with Runtime(tmp_path / "run", default_projections()) as rt:
        rt.start_reactor(RewardReactor())
        await rt.emit(BaselineFrozen(family="calc_chain", model="Qwen/Qwen3-0.6B", score=0.5, n=200))
        await rt.emit(BaselineFrozen(family="calc_chain", model="Qwen/Qwen3-1.7B", score=0.742, n=200))
        for ev in events:
            await rt.emit(ev)
        with anyio.fail_after(5):
            while len(rt.state(RewardsProjection)) < 3:
                await anyio.sleep(0.01)
        return dict(rt.state(RewardsProjection))


def test_each_episode_gets_its_reward_from_its_outcome(tmp_path: Path) -> None:
    events = [
        *_episode("good", attempts=1, validated=True),
        JobQueued(
            job_id="j1",
            episode_id="good",
            family="calc_chain",
            base_model="Qwen/Qwen3-1.7B",
            bundle="b",
            time_budget_s=600.0,
        ),
        *_episode("dead", attempts=2, validated=True),
        JobQueued(job_id="j2", episode_id="dead", family="calc_chain", base_model="Qwen/Qwen3-0.6B", bundle="b"),
        *_episode("nope", attempts=0, validated=False, parseable=False),
        JobFailed(job_id="j2", reason="oom"),
        JobSucceeded(job_id="j1", pre=0.5, post=0.80, train_seconds=300.0),
    ]
    rewards = anyio.run(_run, tmp_path, events)
    good, dead, nope = rewards["good"], rewards["dead"], rewards["nope"]
    # 0.35*1 + 0.60*(0.25*0.80 + 0.75*(0.80-0.742)) + 0.05*(1 - 300/600)
    assert good.reward == pytest.approx(0.35 + 0.60 * (0.2 + 0.75 * 0.058) + 0.05 * 0.5, abs=1e-12)  # type: ignore[attr-defined]
    assert good.best_pre == 0.742 and good.base_model == "Qwen/Qwen3-1.7B"  # type: ignore[attr-defined]
    assert dead.quality == 0.0 and dead.job_failure == "oom"  # type: ignore[attr-defined]
    assert dead.reward == pytest.approx(0.35 * 0.5)  # type: ignore[attr-defined]
    assert nope.reward == -0.1  # type: ignore[attr-defined]


def test_a_job_scored_on_another_number_of_tasks_than_best_pre_is_refused_and_says_why(tmp_path: Path) -> None:
    queued = JobQueued(job_id="j1", episode_id="ep", family="calc_chain", base_model="Qwen/Qwen3-0.6B", bundle="b")

    async def go(eval_n: float, where: str) -> tuple[dict[str, object], dict[str, str]]:
        reactor = RewardReactor()
        async with Runtime(tmp_path / where, default_projections()) as rt:
            rt.start_reactor(reactor)
            await rt.emit(BaselineFrozen(family="calc_chain", model="Qwen/Qwen3-0.6B", score=0.5, n=200))
            for ev in (*_episode("ep", attempts=1, validated=True), queued):
                await rt.emit(ev)
            await rt.emit(JobSucceeded(job_id="j1", pre=0.47, post=0.47, train_seconds=1.0, metrics={"eval_n": eval_n}))
            with anyio.move_on_after(1):
                while not rt.state(RewardsProjection) and not reactor.refused:
                    await anyio.sleep(0.01)
            return dict(rt.state(RewardsProjection)), reactor.refused

    rewards, refused = anyio.run(go, 200.0, "same")
    assert "ep" in rewards and refused == {}  # the same n: rewarded (the check has something to pass)
    rewards, refused = anyio.run(go, 32.0, "subset")
    assert rewards == {}
    assert "32 hidden tasks but best_pre on 200" in refused["ep"]
