"""The GRPO training loop on a CPU: rollouts, update, collapse guard, progress, per-phase timings.

Each step draws ``batch_size // group_size`` tasks from the env (shuffled with the run's seed, cycling
when the taskset is smaller than the run), runs each ``group_size`` times in process with the tiny model
sampling, and applies :func:`._grpo.grpo_update`. The model is updated in place (under the policy's
model lock, so no rollout samples from half-updated weights).

Collapse guard (the failure measured on the tiny model: one oversized update and every reply is
malformed, every group scores 0, no gradient, no recovery): a batch is *collapsed* when it earns no
reward at all although the last healthy batches earned enough for that to be improbable by chance, or
when most of its rollouts are malformed although the first batch's were not (see ``_collapsed``). On a
collapsed batch the weights (and optimizer state) roll back to the last healthy snapshot, the learning
rate halves, and the batch is discarded; after ``max_rollbacks`` training stops on the healthy weights. A
run whose batches carry no gradient at all from the start (every group scored
alike: the env rewards nothing, or everything) stops after ``idle_stop`` batches: more of them cannot
change the model.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec
import structlog
import torch
from transformers import Qwen3ForCausalLM

from adapters.inproc import InprocEnv, InprocRunner, RolloutSettings
from adapters.tiny.model import Checkpoint
from adapters.tiny.policy import TinyPolicy

from ._collect import BatchStats, TurnSeeded, batch_stats, collect
from ._grpo import UpdateStats, grpo_update
from ._settings import CpuTrainSettings

__all__ = ["EnvFailure", "StepRecord", "TrainReport", "train"]

log = structlog.get_logger(__name__)

Action = Literal["update", "no_signal", "rollback"]
StopReason = Literal["max_steps", "collapsed", "no_signal", "deadline"]
StepCallback = Callable[["StepRecord"], Awaitable[None]]


class EnvFailure(RuntimeError):
    """Most rollouts of a batch failed with an error: the env (or its tools) is broken."""


class StepRecord(msgspec.Struct, frozen=True, kw_only=True):
    step: int  # 1-based
    action: Action
    batch: BatchStats
    update: UpdateStats | None
    learning_rate: float
    rollout_seconds: float
    learn_seconds: float


class TrainReport(msgspec.Struct, frozen=True, kw_only=True):
    steps: list[StepRecord]
    stop_reason: StopReason
    rollbacks: int
    rollout_seconds: float
    learn_seconds: float

    @property
    def updates(self) -> int:
        return sum(s.action == "update" for s in self.steps)


class _TaskStream:
    """Tasks in a seeded order, reshuffled on every pass through a finite taskset."""

    def __init__(self, tasks: list[Any], seed: int) -> None:
        if not tasks:
            raise ValueError("the env has no tasks")
        self._tasks = tasks
        self._rng = random.Random(seed)
        self._order: list[Any] = []

    def take(self, n: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < n:
            if not self._order:
                self._order = list(self._tasks)
                self._rng.shuffle(self._order)
            out.append(self._order.pop())
        return out


def _lr_factor(settings: CpuTrainSettings, step: int) -> float:
    """The scheduler's multiplier for optimizer step ``step`` (0-based, counted in RL steps)."""
    warm = settings.warmup_steps
    if warm and step < warm:
        return (step + 1) / (warm + 1)
    span = max(1, settings.max_steps - warm)
    progress = min(1.0, (step - warm) / span)
    if settings.scheduler == "linear":
        return max(0.0, 1.0 - progress)
    if settings.scheduler == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0


def _optimizer(model: torch.nn.Module, settings: CpuTrainSettings) -> torch.optim.Optimizer:
    if settings.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)


async def train(
    ckpt: Checkpoint,
    env: InprocEnv,
    settings: CpuTrainSettings,
    *,
    on_step: StepCallback | None = None,
    deadline: float | None = None,
    task_limit: int | None = None,
) -> TrainReport:
    """Train ``ckpt.model`` in place on ``env`` with GRPO; ``deadline`` is a ``time.monotonic()`` bound."""
    torch.manual_seed(settings.seed)
    model = ckpt.model
    model.train(False)
    policy = TinyPolicy(ckpt, seed=settings.seed, max_batch=max(64, settings.batch_size), max_context=settings.seq_len)
    rollout_settings = RolloutSettings(
        model=settings.model,
        sampling={"temperature": settings.temperature, "max_tokens": settings.max_tokens},
        max_turns=settings.max_turns,
    )
    needed = task_limit if task_limit is not None else settings.max_steps * settings.tasks_per_step
    stream = _TaskStream(env.tasks(needed), settings.seed)
    optimizer = _optimizer(model, settings)
    reference = copy.deepcopy(model).train(False) if settings.kl_coef > 0 else None
    pad_id = int(ckpt.tokenizer.pad_token_id or 0)

    steps: list[StepRecord] = []
    base_lr = settings.learning_rate
    lr_scale = 1.0
    rollbacks = 0
    recent: list[float] = []  # mean rewards of the last healthy batches
    ever_signal = False
    idle = 0
    first_malformed: float | None = None
    healthy: tuple[dict[str, Any], dict[str, Any]] | None = None
    rollout_total = learn_total = 0.0
    stop: StopReason = "max_steps"
    try:
        async with InprocRunner(env, TurnSeeded(policy), rollout_settings) as runner:
            for step in range(settings.max_steps):
                if deadline is not None and time.monotonic() >= deadline:
                    stop = "deadline"
                    break
                started = time.perf_counter()
                episodes, results = await collect(
                    runner, policy, stream.take(settings.tasks_per_step), settings.group_size
                )
                rollout_s = time.perf_counter() - started
                rollout_total += rollout_s
                stats = batch_stats(episodes, results)
                if stats.errors > 0.5:
                    raise EnvFailure(
                        f"{stats.errors:.0%} of the rollouts of step {step + 1} failed: {stats.first_error}"
                    )
                if first_malformed is None:
                    first_malformed = stats.malformed
                collapsed = _collapsed(stats, recent, first_malformed, settings)
                lr = base_lr * lr_scale * _lr_factor(settings, step)
                update: UpdateStats | None = None
                started = time.perf_counter()
                if collapsed:
                    if healthy is None or rollbacks >= settings.max_rollbacks:
                        if healthy is not None:
                            _restore(model, optimizer, healthy, policy)
                        stop = "collapsed"
                        steps.append(_record(step, "rollback", stats, None, lr, rollout_s, 0.0))
                        log.warning("cpu_trainer.collapsed_stop", step=step + 1, rollbacks=rollbacks)
                        if on_step is not None:
                            await on_step(steps[-1])
                        break
                    _restore(model, optimizer, healthy, policy)
                    rollbacks += 1
                    lr_scale *= 0.5
                    action: Action = "rollback"
                    log.warning("cpu_trainer.rolled_back", step=step + 1, lr_scale=lr_scale)
                else:
                    recent = [*recent, stats.reward_mean][-3:]
                    healthy = (copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()))
                    trainable = [e for e in episodes if e.ok]
                    for group in optimizer.param_groups:
                        group["lr"] = lr
                    update = await asyncio.to_thread(
                        _update_locked, policy, model, optimizer, trainable, settings, reference, pad_id
                    )
                    if update.episodes == 0:
                        action = "no_signal"
                        idle = idle + 1 if not ever_signal else 0
                    else:
                        action = "update"
                        ever_signal = True
                        idle = 0
                learn_s = time.perf_counter() - started
                learn_total += learn_s
                steps.append(_record(step, action, stats, update, lr, rollout_s, learn_s))
                log.info(
                    "cpu_trainer.step",
                    step=step + 1,
                    action=action,
                    reward=round(stats.reward_mean, 4),
                    loss=None if update is None else round(update.loss, 5),
                    rollout_s=round(rollout_s, 2),
                    learn_s=round(learn_s, 2),
                )
                if on_step is not None:
                    await on_step(steps[-1])
                if not ever_signal and idle >= settings.idle_stop:
                    stop = "no_signal"
                    break
    finally:
        await policy.aclose()
    return TrainReport(
        steps=steps, stop_reason=stop, rollbacks=rollbacks, rollout_seconds=rollout_total, learn_seconds=learn_total
    )


def _collapsed(stats: BatchStats, recent: list[float], first_malformed: float, settings: CpuTrainSettings) -> bool:
    """Whether a batch shows the collapse signature rather than bad luck.

    No reward at all is only suspicious when the last healthy batches earned enough that an all-zero batch
    is improbable by chance (0.85^64 ~ 3e-5 at a 15% success rate); a mostly malformed batch only when the
    first batch was well-formed (a base that is malformed anyway has nothing to collapse from).
    """
    rate = sum(recent) / len(recent) if recent else 0.0
    no_reward = stats.reward_max <= 0.0 and rate >= settings.collapse_reward_rate
    malformed = stats.malformed >= settings.malformed_limit and first_malformed < settings.malformed_limit / 2
    return no_reward or malformed


def _record(
    step: int,
    action: Action,
    stats: BatchStats,
    update: UpdateStats | None,
    lr: float,
    rollout_s: float,
    learn_s: float,
) -> StepRecord:
    return StepRecord(
        step=step + 1,
        action=action,
        batch=stats,
        update=update,
        learning_rate=lr,
        rollout_seconds=rollout_s,
        learn_seconds=learn_s,
    )


def _update_locked(
    policy: TinyPolicy,
    model: Qwen3ForCausalLM,
    optimizer: torch.optim.Optimizer,
    episodes: list[Any],
    settings: CpuTrainSettings,
    reference: Qwen3ForCausalLM | None,
    pad_id: int,
) -> UpdateStats:
    with policy.model_lock:
        return grpo_update(
            model,
            optimizer,
            episodes,
            temperature=settings.temperature,
            clip_low=settings.clip_low,
            clip_high=settings.clip_high,
            epochs=settings.epochs,
            grad_clip=settings.grad_clip,
            kl_coef=settings.kl_coef,
            reference=reference,
            drop_zero_advantage=settings.drop_zero_advantage,
            pad_id=pad_id,
        )


def _restore(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    snapshot: tuple[dict[str, Any], dict[str, Any]],
    policy: TinyPolicy,
) -> None:
    with policy.model_lock:
        model.load_state_dict(snapshot[0])
        optimizer.load_state_dict(snapshot[1])
