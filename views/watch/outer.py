"""Outer-loop progress: batches, which episode belongs to which step, LoRA steps and sampler versions.

An episode belongs to the open batch (started, not yet collected) whose task list has a free slot for its task
(``group_size`` episodes per task); ``batch.collected`` then states the membership exactly and overrides the
guess. Episodes of no batch (a holdout arm) stay unassigned. ``episode.stale_discarded`` frees the slot; the
stragglers of a group closed short (``group.closed_short``) count as discarded too.
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.projection import Projection, handles
from events import (
    BatchCollected,
    BatchStarted,
    EpisodeStaleDiscarded,
    EpisodeStarted,
    GroupClosedShort,
    LoRAStepApplied,
    RunStarted,
    RunWiring,
    SamplerPublished,
)

__all__ = ["BatchProgress", "OuterProjection", "OuterState", "in_order", "planned_steps"]


class BatchProgress(msgspec.Struct, kw_only=True):
    step: int
    group_size: int
    tasks: list[str]
    expected: int  # episodes the batch waits for: tasks x group size
    slots: dict[str, int] = {}  # task id -> episodes started for it in this batch
    episodes: list[str] = []
    task_of: dict[str, str] = {}  # episode id -> its task id (to free the slot of a discarded episode)
    started_ts: float = 0.0
    collected: bool = False
    collected_ts: float = 0.0
    trained: bool = False
    trained_ts: float = 0.0
    metrics: dict[str, float] = {}


class OuterState(msgspec.Struct, kw_only=True):
    batches: dict[str, BatchProgress] = {}  # str(step) -> batch (str keys: states hash canonically)
    episode_step: dict[str, int] = {}
    planned_steps: int = 0  # the step the latest start or resume runs to, else the config's (0: unknown)
    last_step: int = 0  # the latest batch started
    lora_steps: int = 0
    sampler_version: int = -1
    sampler_path: str = ""
    stale_discarded: int = 0


def in_order(state: OuterState) -> list[BatchProgress]:
    """Every batch, by step."""
    return sorted(state.batches.values(), key=lambda b: b.step)


def planned_steps(config: dict[str, Any]) -> int:
    """The number of outer steps a run config plans, if it says (``[outer].steps`` or ``steps``)."""
    outer = config.get("outer")
    value = outer.get("steps") if isinstance(outer, dict) else config.get("steps")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class OuterProjection(Projection[OuterState]):
    name = "outer"
    state_type = OuterState

    def initial(self) -> OuterState:
        return OuterState()

    @handles(RunStarted)
    def _run(self, s: OuterState, e: RunStarted) -> OuterState:
        s.planned_steps = planned_steps(e.config)
        return s

    @handles(RunWiring)
    def _wiring(self, s: OuterState, e: RunWiring) -> OuterState:
        # Every start and resume says the step it runs to: a resume with a larger --max-steps moves the plan.
        if e.steps > 0:
            s.planned_steps = e.steps
        return s

    @handles(BatchStarted)
    def _batch(self, s: OuterState, e: BatchStarted) -> OuterState:
        s.batches[str(e.step)] = BatchProgress(
            step=e.step,
            group_size=e.group_size,
            tasks=list(e.task_ids),
            expected=len(e.task_ids) * e.group_size,
            started_ts=self.current.ts,
        )
        s.last_step = max(s.last_step, e.step)
        return s

    @handles(EpisodeStarted)
    def _episode(self, s: OuterState, e: EpisodeStarted) -> OuterState:
        for b in in_order(s):
            if b.collected or e.task_id not in b.tasks or b.slots.get(e.task_id, 0) >= b.group_size:
                continue
            b.slots[e.task_id] = b.slots.get(e.task_id, 0) + 1
            b.episodes.append(e.episode_id)
            b.task_of[e.episode_id] = e.task_id
            s.episode_step[e.episode_id] = b.step
            break
        return s

    @handles(EpisodeStaleDiscarded)
    def _stale(self, s: OuterState, e: EpisodeStaleDiscarded) -> OuterState:
        s.stale_discarded += 1
        step = s.episode_step.pop(e.episode_id, None)
        b = s.batches.get(str(step)) if step is not None else None
        if b is not None and e.episode_id in b.episodes:
            b.episodes.remove(e.episode_id)
            task = b.task_of.pop(e.episode_id, "")
            if b.slots.get(task, 0) > 0:  # the slot is free again for the task's re-run
                b.slots[task] -= 1
        return s

    @handles(GroupClosedShort)
    def _short(self, s: OuterState, e: GroupClosedShort) -> OuterState:
        s.stale_discarded += len(e.dropped_episode_ids)  # never trained; batch.collected leaves them out
        return s

    @handles(BatchCollected)
    def _collected(self, s: OuterState, e: BatchCollected) -> OuterState:
        b = s.batches.get(str(e.step))
        if b is None:  # collected with no batch.started in this log: keep what it says
            b = s.batches[str(e.step)] = BatchProgress(step=e.step, group_size=0, tasks=[], expected=len(e.episode_ids))
        for eid in b.episodes:
            if s.episode_step.get(eid) == e.step and eid not in e.episode_ids:
                del s.episode_step[eid]
        b.episodes = list(e.episode_ids)
        for eid in e.episode_ids:
            s.episode_step[eid] = e.step
        b.collected, b.collected_ts = True, self.current.ts
        return s

    @handles(LoRAStepApplied)
    def _lora(self, s: OuterState, e: LoRAStepApplied) -> OuterState:
        s.lora_steps += 1
        b = s.batches.get(str(e.step))
        if b is not None:
            b.trained, b.trained_ts, b.metrics = True, self.current.ts, dict(e.metrics)
        return s

    @handles(SamplerPublished)
    def _sampler(self, s: OuterState, e: SamplerPublished) -> OuterState:
        if e.sampler_version >= s.sampler_version:
            s.sampler_version, s.sampler_path = e.sampler_version, e.path
        return s
