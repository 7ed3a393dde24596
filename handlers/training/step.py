"""One learner step, top to bottom: stale groups out (and re-queued), capped episodes out, advantages, datums,
forward-backward + optimizer step (metered), checkpoint, events.

Capped episodes (ended by the run or global budget cap) are left out of the batch and of their group's GRPO
baseline, as docs/reward.md says; ``batch.collected`` lists them. A batch with nothing but capped episodes
cannot train: :class:`BatchAllCapped`. With a meter (:mod:`handlers.training.meter`) the step is paid for
before it runs and settled after, as a ``training`` cost.

Events, in order: ``episode.stale_discarded`` (one per discarded episode), ``batch.collected``,
``lora.step_applied``, ``sampler.published`` (version ``step + 1``: version 0 is the base model, and the
weights after step ``s`` serve version ``s + 1``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from engine.lazylog import lazy_logger
from events import EventBody
from events.learning import BatchCollected, EpisodeStaleDiscarded, LoRAStepApplied, SamplerPublished
from handlers.ports.learner import LearnerPort
from handlers.training.advantages import group_advantages
from handlers.training.config import OuterConfig
from handlers.training.datums import DatumSpec, trajectory_to_datums
from handlers.training.episodes import EpisodeGroup
from handlers.training.loss import loss_fn_config
from handlers.training.meter import TrainingMeter
from handlers.training.staleness import split_by_staleness

__all__ = [
    "BatchAllCapped",
    "StepResult",
    "build_batch_datums",
    "discard_episode",
    "discard_stale",
    "learner_step",
    "without_capped",
]

log = lazy_logger(__name__)

Emit = Callable[[EventBody], Awaitable[Any]]


class StepResult(msgspec.Struct, frozen=True, kw_only=True):
    applied: LoRAStepApplied | None  # None: nothing fresh enough to train on
    requeued_task_ids: list[str]  # tasks whose groups were stale, to run again


class BatchAllCapped(RuntimeError):
    """Every episode of a batch was ended by the run or global budget cap: there is nothing to train on."""


def without_capped(groups: Sequence[EpisodeGroup]) -> tuple[list[EpisodeGroup], list[str]]:
    """The groups with their capped episodes removed (a group left empty is dropped), and the capped ids."""
    kept: list[EpisodeGroup] = []
    capped: list[str] = []
    for g in groups:
        capped += [ep.episode_id for ep in g.episodes if ep.capped]
        rest = [ep for ep in g.episodes if not ep.capped]
        if rest:
            kept.append(EpisodeGroup(task_id=g.task_id, episodes=rest) if len(rest) < len(g.episodes) else g)
    return kept, capped


def build_batch_datums(groups: Sequence[EpisodeGroup]) -> list[DatumSpec]:
    """Every group's advantages, then every episode's datums (a zero-advantage episode still yields datums:
    the loss is zero there but keeping them keeps the batch shape honest)."""
    out: list[DatumSpec] = []
    for group in groups:
        advs = group_advantages([ep.reward for ep in group.episodes])
        for ep, adv in zip(group.episodes, advs, strict=True):
            out.extend(trajectory_to_datums(ep.turns, adv))
    return out


async def discard_stale(stale: Sequence[EpisodeGroup], *, step: int, config: OuterConfig, emit: Emit) -> list[str]:
    """Emit ``episode.stale_discarded`` for every episode of the ``stale`` groups; their task ids to re-queue."""
    for group in stale:
        for ep in group.episodes:
            await discard_episode(ep.episode_id, group.task_id, ep.sampler_version, step=step, config=config, emit=emit)
    return [g.task_id for g in stale]


async def discard_episode(
    episode_id: str, task_id: str, sampler_version: int, *, step: int, config: OuterConfig, emit: Emit
) -> None:
    """``episode.stale_discarded`` for one episode (finished or still running) too stale for ``step``."""
    await emit(
        EpisodeStaleDiscarded(
            episode_id=episode_id,
            sampler_version=sampler_version,
            step=step,
            task_id=task_id,
            max_steps_off_policy=config.max_steps_off_policy,
        )
    )


async def learner_step(
    learner: LearnerPort,
    groups: Sequence[EpisodeGroup],
    *,
    step: int,
    config: OuterConfig,
    emit: Emit,
    meter: TrainingMeter | None = None,
) -> StepResult:
    """Train step ``step`` on the fresh groups among ``groups``; discard and re-queue the stale ones."""
    split = split_by_staleness(groups, step, config.max_steps_off_policy)
    requeued = await discard_stale(split.stale, step=step, config=config, emit=emit)
    if not split.fresh:
        return StepResult(applied=None, requeued_task_ids=requeued)

    trainable, capped = without_capped(split.fresh)
    episodes = [ep for g in trainable for ep in g.episodes]
    lags = [step - ep.sampler_version for ep in episodes] or [0]
    await emit(
        BatchCollected(
            step=step,
            episode_ids=[ep.episode_id for ep in episodes],
            task_ids=[g.task_id for g in split.fresh],
            staleness_max=max(lags),
            staleness_mean=sum(lags) / len(lags),
            capped_episode_ids=capped,
        )
    )
    if not episodes:
        raise BatchAllCapped(
            f"step {step}: all {len(capped)} episodes of the batch were ended by the run or global budget cap; "
            f"nothing to train on (raise [budget] run_usd / global_usd, then `ait resume`)"
        )
    datums = build_batch_datums(trainable)
    paid = meter.step(step, datums) if meter is not None else contextlib.nullcontext()
    async with paid:
        outcome = await learner.train_step(
            datums,
            loss_fn=config.loss_fn,
            loss_fn_config=loss_fn_config(config.loss_fn, clip_low=config.clip_low, clip_high=config.clip_high),
            learning_rate=config.learning_rate,
        )
    with_state = config.save_every > 0 and (step + 1) % config.save_every == 0
    state_path, sampler_path = await learner.save(f"step_{step + 1:06d}", with_state=with_state)
    applied = LoRAStepApplied(
        step=step,
        metrics=dict(outcome.metrics),
        state_path=state_path,
        sampler_path=sampler_path,
        loss_fn=config.loss_fn,
        learning_rate=config.learning_rate,
        n_datums=len(datums),
        n_episodes=len(episodes),
        n_tokens=sum(d.n_trained for d in datums),
    )
    await emit(applied)
    await emit(SamplerPublished(sampler_version=step + 1, path=sampler_path, step=step))
    log.info(
        "outer.step_applied",
        step=step,
        episodes=len(episodes),
        datums=len(datums),
        stale=len(split.stale),
        capped=len(capped),
    )
    return StepResult(applied=applied, requeued_task_ids=requeued)
