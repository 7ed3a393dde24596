"""Scoring a tiny model on a family's hidden eval, in process (no HTTP, no verifiers): seconds for 200 tasks.

The eval settings mirror the family's task spec (``families.spec_render``): the hidden set, the family
system prompt and tools, ``max_turns`` = the longest reference solution's tool calls + 3, and the
sampling temperature the scores are quoted at (1.0: small bases are partial when sampled, not greedy).
A score always carries its sampling settings so two scores are only compared at the same setting.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import torch

from families import Family, Task, dev_eval_tasks, get_family, hidden_tasks

from .episodes import Episode, TurnCallback, run_episodes
from .generate import SamplingParams
from .model import Checkpoint

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "EVAL_TEMPERATURE",
    "ScoreReport",
    "eval_max_turns",
    "score_dev",
    "score_hidden",
    "score_tasks",
]

EVAL_TEMPERATURE = 1.0
DEFAULT_MAX_TOKENS = 96  # per assistant turn; the longest reference tool call is well under half of this


class ScoreReport(msgspec.Struct, frozen=True, kw_only=True):
    family: str
    model: str
    score: float  # mean reward
    n: int
    rewards: list[float]
    answered: float  # fraction of episodes that ended with a reply without tool calls
    temperature: float
    top_p: float
    max_tokens: int
    max_turns: int
    seed: int | None
    seconds: float


def eval_max_turns(family: Family) -> int:
    """The hidden eval's turn limit: longest reference solution's tool calls + 3 (as in the task spec)."""
    return max(sum(s.tool is not None for s in family.solve(t)) for t in hidden_tasks(family)) + 3


def score_tasks(
    ckpt: Checkpoint,
    family: Family,
    tasks: Sequence[Task],
    params: SamplingParams,
    *,
    max_turns: int,
    seed_source: torch.Generator | None = None,
    on_turn: TurnCallback | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[ScoreReport, list[Episode]]:
    """Mean reward over ``tasks`` (one episode each) and the episodes themselves."""
    started = time.perf_counter()
    episodes = run_episodes(
        ckpt, family, tasks, params, max_turns=max_turns, seed_source=seed_source, on_turn=on_turn, tools=tools
    )
    rewards = [ep.reward for ep in episodes]
    report = ScoreReport(
        family=family.name,
        model=ckpt.name,
        score=sum(rewards) / len(rewards) if rewards else 0.0,
        n=len(rewards),
        rewards=rewards,
        answered=sum(ep.stop == "answered" for ep in episodes) / len(episodes) if episodes else 0.0,
        temperature=params.temperature,
        top_p=params.top_p,
        max_tokens=params.max_tokens,
        max_turns=max_turns,
        seed=params.seed,
        seconds=round(time.perf_counter() - started, 3),
    )
    return report, episodes


def score_hidden(
    ckpt: Checkpoint,
    family: str | Family,
    *,
    temperature: float = EVAL_TEMPERATURE,
    top_p: float = 1.0,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    seed: int = 0,
    limit: int | None = None,
    on_turn: TurnCallback | None = None,
) -> ScoreReport:
    """The model's score on the family's hidden eval set (the first ``limit`` tasks if given)."""
    fam = get_family(family) if isinstance(family, str) else family
    tasks = list(hidden_tasks(fam))[:limit]
    params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
    report, _ = score_tasks(ckpt, fam, tasks, params, max_turns=eval_max_turns(fam), on_turn=on_turn)
    return report


def score_dev(
    ckpt: Checkpoint,
    family: str | Family,
    *,
    temperature: float = EVAL_TEMPERATURE,
    top_p: float = 1.0,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    seed: int = 0,
    limit: int | None = None,
) -> ScoreReport:
    """The model's score on the family's dev eval (``families.dev_eval_tasks``): what a multi-job episode's
    ``job_result`` shows the agent. Same sampling as the hidden eval; the turn limit comes from the dev tasks'
    own reference solutions, so nothing here reads the hidden set (or, in a sealed process, the key)."""
    fam = get_family(family) if isinstance(family, str) else family
    tasks = list(dev_eval_tasks(fam, limit))
    max_turns = max(sum(s.tool is not None for s in fam.solve(t)) for t in tasks) + 3 if tasks else 3
    params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
    # The tool schemas from a dev task's toolbox: Family.tool_schemas() would build a hidden task to describe them.
    tools = fam.tools(tasks[0]).schemas() if tasks else []
    report, _ = score_tasks(ckpt, fam, tasks, params, max_turns=max_turns, tools=tools)
    return report
