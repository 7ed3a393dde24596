"""A fake outer-loop episode runner: random rewards after random, heavy-tailed (simulated) durations."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from handlers.training import FinishedEpisode, SampledTurn
from handlers.training.batch import TaskRef

__all__ = ["Started", "fake_episode_runner"]

Started = list[tuple[str, str, int, str]]  # (episode id, task id, sampler version, sampler path) per start


def fake_episode_runner(
    seed: int, started: Started, *, tail_prob: float = 0.1, unit_s: float = 0.001, straggle: float = 20.0
) -> Callable[[str, TaskRef, int, str], Awaitable[FinishedEpisode]]:
    """``OuterLoop``'s ``run_episode``: records each start; a fraction ``tail_prob`` of episodes are stragglers
    that take ``straggle`` x longer, so a loop that waits for the slowest episode shows it."""
    rng = random.Random(seed)

    async def run_episode(episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
        started.append((episode_id, task.task_id, version, path))
        await asyncio.sleep(unit_s * (straggle if rng.random() < tail_prob else rng.random()))
        return FinishedEpisode(
            episode_id=episode_id,
            task_id=task.task_id,
            sampler_version=version,
            reward=rng.random(),
            turns=[SampledTurn(prompt_tokens=[1, 2], sampled_tokens=[3], sampled_logprobs=[-0.3])],
        )

    return run_episode
