"""Outer-loop throughput simulation: trained episodes per hour, asynchronous off-policy vs synchronous.

SIMULATED. An episode = agent turns + validation (lognormal, ``agent_median_s``) + one inner job whose
duration comes from the fleet simulator's heavy-tailed model (adapters/sim/durations.py). A batch = 5 tasks x
group 8 = 40 episodes; a learner step takes ``learner_s``.

- sync: start the batch's 40 episodes on the current sampler, wait for *all* of them (the straggler barrier),
  train, publish, repeat.
- async: ``slots`` episodes run at all times; episodes of a task are started together as a group on the newest
  sampler. The learner trains as soon as 5 whole groups are done; a group sampled with version v that would
  train at step s with s - v > K is discarded and its task re-run (counted). Sampling never waits on the learner.

    .venv/bin/python -m benchmarks.outer_sim [--steps 200] [--learner-s 120] [--seed 0]
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
from collections import deque

import msgspec

from adapters.sim.durations import DurationModel

__all__ = ["SimResult", "run_async", "run_sync"]


class SimResult(msgspec.Struct, frozen=True, kw_only=True):
    mode: str
    steps: int
    hours: float
    trained_episodes: int
    discarded_episodes: int
    staleness_mean: float

    @property
    def episodes_per_hour(self) -> float:
        return self.trained_episodes / self.hours


class _Episodes:
    """Episode durations: agent time + a heavy-tailed job, from one seeded stream (paired across modes)."""

    def __init__(self, seed: int, agent_median_s: float, model: DurationModel) -> None:
        self._rng = random.Random(f"{seed}:outer")
        self._agent = agent_median_s
        self._model = model

    def draw(self) -> float:
        return self._agent * math.exp(0.4 * self._rng.gauss(0.0, 1.0)) + self._model.sample(self._rng)


def run_sync(
    *,
    steps: int,
    tasks: int = 5,
    group: int = 8,
    learner_s: float = 120.0,
    seed: int = 0,
    agent_median_s: float = 300.0,
    model: DurationModel | None = None,
) -> SimResult:
    eps = _Episodes(seed, agent_median_s, model or DurationModel())
    t = 0.0
    for _ in range(steps):
        t += max(eps.draw() for _ in range(tasks * group)) + learner_s
    return SimResult(
        mode="sync",
        steps=steps,
        hours=t / 3600,
        trained_episodes=steps * tasks * group,
        discarded_episodes=0,
        staleness_mean=0.0,
    )


def run_async(
    *,
    steps: int,
    tasks: int = 5,
    group: int = 8,
    learner_s: float = 120.0,
    seed: int = 0,
    slots: int = 40,
    max_off: int = 2,
    agent_median_s: float = 300.0,
    model: DurationModel | None = None,
) -> SimResult:
    if slots < group:
        raise ValueError("slots must hold at least one group")
    eps = _Episodes(seed, agent_median_s, model or DurationModel())
    heap: list[tuple[float, int, str, int]] = []  # (time, tiebreak, kind, group id)
    seq = 0
    version = 0  # newest published sampler
    left: dict[int, int] = {}  # group -> episodes still running
    gversion: dict[int, int] = {}
    done: deque[int] = deque()  # finished groups, in finish order
    free = slots
    next_group = 0
    learner_busy = False
    step = 0
    trained = discarded = 0
    lag_sum = 0
    t = 0.0

    def start_groups() -> None:
        nonlocal free, next_group, seq
        while free >= group:  # a group starts whole, on the newest sampler
            g = next_group
            next_group += 1
            left[g], gversion[g] = group, version
            free -= group
            for _ in range(group):
                seq += 1
                heapq.heappush(heap, (t + eps.draw(), seq, "ep", g))

    def try_learn() -> None:
        nonlocal learner_busy, discarded, seq, trained, lag_sum
        if learner_busy:
            return
        # drop groups too stale to train at this step (their tasks are simply re-run: new groups)
        for g in [g for g in done if step - gversion[g] > max_off]:
            done.remove(g)
            discarded += group
        if len(done) < tasks:
            return
        batch = sorted(done, key=lambda g: gversion[g])[:tasks]
        for g in batch:
            done.remove(g)
            lag_sum += (step - gversion[g]) * group
        trained += tasks * group
        learner_busy = True
        seq += 1
        heapq.heappush(heap, (t + learner_s, seq, "learn", -1))

    start_groups()
    while step < steps:
        t, _, kind, g = heapq.heappop(heap)
        if kind == "ep":
            free += 1
            left[g] -= 1
            if left[g] == 0:
                done.append(g)
        else:
            learner_busy = False
            step += 1
            version = step
        start_groups()
        try_learn()
    return SimResult(
        mode=f"async(slots={slots},K={max_off})",
        steps=steps,
        hours=t / 3600,
        trained_episodes=trained,
        discarded_episodes=discarded,
        staleness_mean=lag_sum / max(1, trained),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--learner-s", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("SIMULATED outer loop: batch 40 = 5 tasks x group 8, staleness K=2, heavy-tailed job times")
    print(f"learner step {args.learner_s:.0f} s, {args.steps} steps, seed {args.seed}")
    sync = run_sync(steps=args.steps, learner_s=args.learner_s, seed=args.seed)
    rows = [sync]
    for slots in (40, 80, 120):
        rows.append(run_async(steps=args.steps, learner_s=args.learner_s, seed=args.seed, slots=slots))
    print(f"{'mode':<24}{'ep/h':>8}{'ratio':>8}{'hours':>9}{'discarded':>11}{'mean lag':>10}")
    for r in rows:
        print(
            f"{r.mode:<24}{r.episodes_per_hour:>8.1f}{r.episodes_per_hour / sync.episodes_per_hour:>8.2f}"
            f"{r.hours:>9.1f}{r.discarded_episodes:>11}{r.staleness_mean:>10.2f}"
        )


if __name__ == "__main__":
    main()
