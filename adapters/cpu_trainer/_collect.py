"""One batch of rollouts for the learner: in-process verifiers rollouts, sampled by the tiny model.

The tiny policy (``adapters.tiny.policy.TinyPolicy``) answers every model call of every rollout, batching
the concurrent ones, and keeps what it sampled (prompt ids, token ids, log-probs) keyed by the rollout's
session id, which the in-process path sets to the trace id. Joining the two gives, per rollout, the
reward from the env's own rubric and the exact tokens to train on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from adapters.inproc import InprocRunner, RolloutResult
from adapters.openai_server import ChatRequest, Reply
from adapters.tiny.episodes import request_seed
from adapters.tiny.policy import TinyPolicy

from ._grpo import EpisodeSample, TurnSample

__all__ = ["BatchStats", "TurnSeeded", "batch_stats", "collect", "rollout_seeds"]


class TurnSeeded:
    """A policy wrapper: a request carrying a rollout seed samples with a seed derived from it and the turn.

    The runner gives every rollout its own ``sampling.seed``; each of its turns then draws from its own
    stream (``request_seed(seed, 0, turn)``), so a run is reproducible whatever order the concurrent
    requests reach the batching policy in, and no two turns of a rollout share a stream.
    """

    def __init__(self, inner: TinyPolicy) -> None:
        self.inner = inner

    async def respond(self, request: ChatRequest) -> Reply:
        if request.seed is not None:
            turn = sum(m.role == "assistant" for m in request.messages)
            request = msgspec.structs.replace(request, seed=request_seed(request.seed, 0, turn))
        return await self.inner.respond(request)


def rollout_seeds(seed: int, step: int, count: int) -> list[int]:
    """One sampling seed per rollout of a step, stable across processes."""
    return [request_seed(seed, step, i) for i in range(count)]


class BatchStats(msgspec.Struct, frozen=True, kw_only=True):
    rollouts: int
    reward_mean: float
    reward_max: float
    malformed: float  # fraction of rollouts
    errors: float  # fraction of rollouts that ended in an error (env or policy failure)
    signal_groups: int  # groups whose rewards differ (the only ones that carry a gradient)
    turns_mean: float
    first_error: str = ""


async def collect(
    runner: InprocRunner,
    policy: TinyPolicy,
    tasks: Sequence[Any],
    group_size: int,
    seeds: Sequence[int] | None = None,
) -> tuple[list[EpisodeSample], list[RolloutResult]]:
    """Run every task ``group_size`` times; return the episodes (group = task position) and the raw results."""
    results = await runner.run(tasks, group_size=group_size, seeds=seeds)
    episodes: list[EpisodeSample] = []
    for i, result in enumerate(results):
        samples = policy.session_samples(result.session_id, pop=True)
        turns = [TurnSample(prompt_ids=s.prompt_ids, token_ids=s.token_ids, logprobs=s.logprobs) for s in samples]
        malformed = not samples or any(s.finish_reason == "length" or not s.text.strip() for s in samples)
        episodes.append(
            EpisodeSample(group=i // group_size, reward=result.reward, turns=turns, malformed=malformed, ok=result.ok)
        )
    return episodes, results


def batch_stats(episodes: Sequence[EpisodeSample], results: Sequence[RolloutResult]) -> BatchStats:
    n = len(episodes)
    if n == 0:
        return BatchStats(
            rollouts=0, reward_mean=0.0, reward_max=0.0, malformed=0.0, errors=0.0, signal_groups=0, turns_mean=0.0
        )
    by_group: dict[int, set[float]] = {}
    for e in episodes:
        if e.ok:
            by_group.setdefault(e.group, set()).add(round(e.reward, 9))
    failed = [r for r in results if not r.ok]
    return BatchStats(
        rollouts=n,
        reward_mean=sum(e.reward for e in episodes) / n,
        reward_max=max(e.reward for e in episodes),
        malformed=sum(e.malformed for e in episodes) / n,
        errors=len(failed) / n,
        signal_groups=sum(len(values) > 1 for values in by_group.values()),
        turns_mean=sum(r.num_turns for r in results) / n,
        first_error=failed[0].errors[0] if failed and failed[0].errors else "",
    )
