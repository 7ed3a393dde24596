"""Outer-loop throughput on a virtual clock: the REAL ``OuterLoop`` with stand-in episodes and learner.

SIMULATED time, real policy. ``handlers/training/loop.py``'s :class:`OuterLoop` runs unchanged on an asyncio
event loop whose clock is virtual (a sleep advances it at once: 200 steps of hours each take seconds of CPU).
Only the edges are stand-ins: an episode sleeps for a drawn duration (agent turns + validation, lognormal
``agent_median_s``, plus one inner job from the fleet simulator's heavy-tailed model in
adapters/sim/durations.py) and returns a one-turn trajectory; the learner sleeps ``learner_s`` per step.
A batch = 5 tasks x group 8 = 40 episodes, staleness bound K = 2.

- sync: the same loop with ``max_steps_off_policy = 0``, ``episode_concurrency`` = the batch and whole groups
  only (``min_group_fraction = 1``): it starts the batch's 5 groups on the current sampler, waits for every
  episode (the straggler barrier), trains, repeats.
- async: ``episode_concurrency`` slots; groups start on the newest sampler whenever 8 slots are free and pacing
  allows (none during a learner step, at most ``tasks_per_batch * (K + 1)`` outstanding); the learner steps once
  5 whole groups are fresh; groups more than K steps stale are discarded (``episode.stale_discarded``, running
  ones cancelled) and their tasks re-run.
- "whole groups" rows: ``min_group_fraction = 1`` (the policy before short groups); "min 0.75" rows: a group at
  its last fresh step trains with the episodes it has if at least 6 of 8 have finished (``group.closed_short``),
  its stragglers cancelled and counted as discarded.
- Inner job hours: an episode's job starts when its agent part ends. The loop tells ``drop_jobs`` which episodes
  it dropped for good (as it tells ``ait train``, which cancels their jobs); a job running then is paid to its
  end without cancellation, and up to the drop plus one long poll (``[fleet] poll_wait_s``, 20 s) with it. Jobs
  of episodes still running when the last step is applied are drained in both cases (a later resume reads them).

    .venv/bin/python -m benchmarks.outer_sim [--steps 200] [--learner-s 120] [--seed 0] [--slots 32,36,40,48]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import selectors
import time
from collections.abc import Sequence
from typing import Any

import msgspec
import structlog

from adapters.sim.durations import DurationModel
from events._base import EventBody
from events.learning import BatchCollected, EpisodeStaleDiscarded, GroupClosedShort, GroupStarted
from handlers.fleet.policy import FleetConfig
from handlers.ports.learner import StepOutcome
from handlers.training.batch import TaskRef
from handlers.training.config import OuterConfig
from handlers.training.datums import DatumSpec, SampledTurn
from handlers.training.episodes import FinishedEpisode
from handlers.training.loop import OuterLoop

__all__ = ["SimResult", "VirtualClockLoop", "run_loop"]


class _VirtualSelector(selectors.SelectSelector):
    """Never blocks: waiting ``timeout`` seconds for I/O moves the loop's clock forward by ``timeout``."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualClockLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self.loop is not None
        if timeout is None:  # nothing scheduled and nothing ready: every task waits on another
            raise RuntimeError("virtual clock: deadlock (no timer and no ready callback)")
        self.loop.now += timeout
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is virtual: the next timer fires as soon as nothing else is ready."""

    def __init__(self) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 0.0

    def time(self) -> float:
        return self.now


class SimResult(msgspec.Struct, frozen=True, kw_only=True):
    mode: str
    steps: int
    hours: float
    trained_episodes: int
    started_episodes: int
    discarded_episodes: int  # stale groups' episodes + the stragglers of groups closed short
    short_groups: int  # groups trained without their stragglers
    staleness_mean: float
    cpu_s: float
    job_hours: float = 0.0  # inner job time paid for with no job cancellation (every job runs to its end)
    dropped_job_hours: float = 0.0  # of it: the jobs of episodes dropped for good, run to their end
    cancelled_job_hours: float = 0.0  # what those jobs still cost when cancelled at the drop

    @property
    def saved_share(self) -> float:
        """The share of all inner job time that cancelling dropped episodes' jobs saves."""
        return (self.dropped_job_hours - self.cancelled_job_hours) / self.job_hours if self.job_hours else 0.0

    @property
    def episodes_per_hour(self) -> float:
        return self.trained_episodes / self.hours

    @property
    def discarded_share(self) -> float:
        return self.discarded_episodes / max(1, self.started_episodes)


class _Episodes:
    """Episode durations: agent time + a heavy-tailed job, from one seeded stream."""

    def __init__(self, seed: int, agent_median_s: float, model: DurationModel) -> None:
        self._rng = random.Random(f"{seed}:outer")
        self._agent = agent_median_s
        self._model = model

    def draw(self) -> tuple[float, float]:
        """(agent turns + validation, the inner job) in seconds."""
        return self._agent * math.exp(0.4 * self._rng.gauss(0.0, 1.0)), self._model.sample(self._rng)


class _Learner:
    """The LearnerPort, standing in for Tinker: a step takes ``learner_s`` of (virtual) time."""

    def __init__(self, learner_s: float) -> None:
        self.learner_s = learner_s
        self.steps = 0

    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        await asyncio.sleep(self.learner_s)
        self.steps += 1
        return StepOutcome(metrics={"datums": float(len(datums))})

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        return "", f"sampler://{name}"


_POLL_WAIT_S = FleetConfig().poll_wait_s  # the default [fleet] poll_wait_s: a cancel is seen within one long poll

_TURN = [SampledTurn(prompt_tokens=[1, 2, 3], sampled_tokens=[4, 5], sampled_logprobs=[-0.5, -0.25])]


def run_loop(
    *,
    mode: str,
    steps: int,
    slots: int = 40,
    max_off: int = 2,
    pace: bool = True,
    min_fraction: float = 0.75,
    tasks: int = 5,
    group: int = 8,
    learner_s: float = 120.0,
    seed: int = 0,
    agent_median_s: float = 300.0,
    model: DurationModel | None = None,
) -> SimResult:
    """Run the real OuterLoop for ``steps`` learner steps on the virtual clock."""
    cfg = OuterConfig(
        group_size=group,
        tasks_per_batch=tasks,
        max_steps_off_policy=max_off,
        episode_concurrency=slots,
        save_every=0,
        max_steps=steps,
        seed=seed,
        min_group_fraction=min_fraction,
    )
    eps = _Episodes(seed, agent_median_s, model or DurationModel())
    rng = random.Random(f"{seed}:reward")
    counts: dict[str, Any] = {"started": 0, "discarded": 0, "short": 0, "trained": 0, "lag": 0.0}

    async def emit(body: EventBody) -> None:
        if isinstance(body, GroupStarted):
            counts["started"] += len(body.episode_ids)
        elif isinstance(body, EpisodeStaleDiscarded):
            counts["discarded"] += 1
        elif isinstance(body, GroupClosedShort):
            counts["discarded"] += len(body.dropped_episode_ids)
            counts["short"] += 1
        elif isinstance(body, BatchCollected):
            counts["trained"] += len(body.episode_ids)
            counts["lag"] += body.staleness_mean * len(body.episode_ids)

    loop = VirtualClockLoop()
    job_at: dict[str, tuple[float, float]] = {}  # episode id -> (its job's start, its duration)
    jobs = {"all": 0.0, "dropped": 0.0, "cancelled": 0.0}

    async def run_episode(episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
        agent_s, job_s = eps.draw()
        job_at[episode_id] = (loop.time() + agent_s, job_s)
        await asyncio.sleep(agent_s + job_s)
        return FinishedEpisode(
            episode_id=episode_id, task_id=task.task_id, sampler_version=version, reward=rng.random(), turns=_TURN
        )

    async def drop_jobs(episode_ids: list[str], reason: str) -> None:
        now = loop.time()
        for eid in episode_ids:
            start, job_s = job_at.pop(eid)
            if now >= start:  # its job was queued (in this model: running); before that there is no job
                jobs["dropped"] += job_s
                jobs["cancelled"] += min(job_s, now - start + _POLL_WAIT_S)

    cpu = time.process_time()
    try:
        outer = OuterLoop(
            config=cfg, learner=_Learner(learner_s), run_episode=run_episode, emit=emit, drop_jobs=drop_jobs
        )
        outer.pace_on_step = pace
        done = loop.run_until_complete(outer.run())
        hours = loop.time() / 3600
        # Every job not dropped is paid to its end: finished ones, and those of episodes in flight at the end
        # (drained), if their agent part was over.
        jobs["all"] = jobs["dropped"] + sum(job_s for start, job_s in job_at.values() if start <= loop.time())
    finally:
        loop.close()
    assert done == steps
    trained = counts["trained"]
    return SimResult(
        mode=mode,
        steps=steps,
        hours=hours,
        trained_episodes=trained,
        started_episodes=counts["started"],
        discarded_episodes=counts["discarded"],
        short_groups=counts["short"],
        staleness_mean=counts["lag"] / max(1, trained),
        cpu_s=time.process_time() - cpu,
        job_hours=jobs["all"] / 3600,
        dropped_job_hours=jobs["dropped"] / 3600,
        cancelled_job_hours=jobs["cancelled"] / 3600,
    )


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings only: no line per step
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--learner-s", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slots", default="32,36,40,48", help="episode_concurrency values for the async rows")
    ap.add_argument("--min-fraction", type=float, default=0.75, help="[outer] min_group_fraction of the short rows")
    args = ap.parse_args()
    print("SIMULATED time, REAL OuterLoop: batch 40 = 5 tasks x group 8, staleness K=2, heavy-tailed job times")
    print(f"learner step {args.learner_s:.0f} s, {args.steps} steps, seed {args.seed}")
    common: dict[str, Any] = {"steps": args.steps, "learner_s": args.learner_s, "seed": args.seed}
    # Sync waits for every episode of its batch (no group closes short): the straggler barrier it is named for.
    sync = run_loop(mode="sync (K=0, 40 slots)", slots=40, max_off=0, min_fraction=1.0, **common)
    rows = [sync]
    for slots in (int(s) for s in args.slots.split(",")):
        for fraction in (1.0, args.min_fraction):
            label = f"async {slots} slots, " + ("whole groups" if fraction >= 1.0 else f"min {fraction:g} of group")
            rows.append(run_loop(mode=label, slots=slots, min_fraction=fraction, **common))
    head = f"{'mode':<34}{'ep/h':>8}{'ratio':>8}{'hours':>9}{'started':>9}{'discarded':>11}{'share':>8}"
    print(f"{head}{'short':>7}{'lag':>6}{'job h':>8}{'dropped':>9}{'cancelled':>10}{'saved':>7}")
    for r in rows:
        print(
            f"{r.mode:<34}{r.episodes_per_hour:>8.1f}{r.episodes_per_hour / sync.episodes_per_hour:>8.2f}"
            f"{r.hours:>9.1f}{r.started_episodes:>9}{r.discarded_episodes:>11}{r.discarded_share:>8.1%}"
            f"{r.short_groups:>7}{r.staleness_mean:>6.2f}{r.job_hours:>8.0f}{r.dropped_job_hours:>9.1f}"
            f"{r.cancelled_job_hours:>10.1f}{r.saved_share:>7.1%}"
        )
    print(
        "job h: inner job hours paid with no cancellation; dropped: of them, the jobs of episodes dropped for good"
        " (run to their end); cancelled: what those cost when cancelled at the drop; saved: the difference, as a"
        " share of job h"
    )
    print(f"(CPU for all rows: {sum(r.cpu_s for r in rows):.1f} s)")


if __name__ == "__main__":
    main()
