"""The asynchronous off-policy outer loop: episodes keep running while the learner trains.

Sampling side: tasks come from a queue (re-queued stale tasks first, then fresh draws announced with
``batch.started``); each task runs as a *group* of ``group_size`` episodes started together on the newest
sampler, as soon as ``group_size`` of the ``episode_concurrency`` slots are free. Finished groups wait for the
learner. Sampling runs ahead of the learner by at most ``tasks_per_batch * (max_steps_off_policy + 1)`` groups
(pacing, so it does not pile up episodes that could only be discarded).

Learner side: as soon as ``tasks_per_batch`` finished groups are fresh enough for step ``s``, the oldest of them
train (:func:`learner_step`); stale ones are discarded and their tasks re-queued. One slow episode never gates
a batch: only whole, finished groups are waited for, and any ``tasks_per_batch`` of them make a batch.

Not yet: resuming mid-batch (in-flight episodes are cancelled at the end or on a crash; see docs/outer-rl.md).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

import structlog

from events.learning import BatchStarted

from .batch import TaskRef, draw_tasks
from .config import OuterConfig
from .episodes import EpisodeGroup, FinishedEpisode
from .port import LearnerPort
from .staleness import split_by_staleness
from .step import Emit, discard_stale, learner_step

__all__ = ["OuterLoop", "RunEpisode"]

log = structlog.get_logger(__name__)

# (episode id, task, sampler version, sampler path) -> the finished episode (reward + sampled turns)
RunEpisode = Callable[[str, TaskRef, int, str], Awaitable[FinishedEpisode]]


class OuterLoop:
    def __init__(
        self,
        *,
        config: OuterConfig,
        learner: LearnerPort,
        run_episode: RunEpisode,
        emit: Emit,
        start_step: int = 0,
        sampler_version: int = 0,
        sampler_path: str = "",
    ) -> None:
        self.cfg = config
        self._learner = learner
        self._run_episode = run_episode
        self._emit = emit
        self.step = start_step
        self.version = sampler_version
        self.sampler_path = sampler_path
        self._queue: deque[TaskRef] = deque()
        self._tasks: dict[str, TaskRef] = {}
        self._draws = 0
        self._episodes = 0
        self._free = config.episode_concurrency
        self._outstanding = 0  # groups started and not yet trained or discarded
        self._done: list[EpisodeGroup] = []
        self._wake = asyncio.Event()  # dispatcher: slots freed, a new sampler, tasks re-queued
        self._learn_wake = asyncio.Event()  # learner: a group finished
        self.requeued: list[str] = []

    async def _next_task(self) -> TaskRef:
        if not self._queue:
            n = self.cfg.tasks_per_batch
            tasks = draw_tasks(self.cfg.families, n, seed=self.cfg.seed, step=self._draws)
            await self._emit(
                BatchStarted(
                    step=self._draws,
                    task_ids=[t.task_id for t in tasks],
                    group_size=self.cfg.group_size,
                    sampler_version=self.version,
                )
            )
            self._draws += 1
            self._queue.extend(tasks)
        task = self._queue.popleft()
        self._tasks[task.task_id] = task
        return task

    async def _run_group(self, task: TaskRef, version: int, path: str) -> None:
        ids = []
        for _ in range(self.cfg.group_size):
            ids.append(f"ep{self._episodes:06d}")
            self._episodes += 1
        try:
            episodes = await asyncio.gather(*(self._run_episode(i, task, version, path) for i in ids))
        finally:
            self._free += self.cfg.group_size
            self._wake.set()
        self._done.append(EpisodeGroup(task_id=task.task_id, episodes=list(episodes)))
        self._learn_wake.set()

    def _can_start(self) -> bool:
        ahead = self.cfg.tasks_per_batch * (self.cfg.max_steps_off_policy + 1)
        return self._free >= self.cfg.group_size and self._outstanding < ahead

    def _take(self, groups: list[EpisodeGroup]) -> None:
        """Remove ``groups`` from the finished list (by identity, before any await: groups keep arriving)."""
        taken = {id(g) for g in groups}
        self._done = [g for g in self._done if id(g) not in taken]
        self._outstanding -= len(groups)

    async def _learn_if_ready(self) -> bool:
        """Discard what is too stale for this step; train if a batch is ready. True if a step was applied."""
        split = split_by_staleness(self._done, self.step, self.cfg.max_steps_off_policy)
        if split.stale:
            self._take(split.stale)
            for tid in await discard_stale(split.stale, step=self.step, config=self.cfg, emit=self._emit):
                self._queue.appendleft(self._tasks[tid])
                self.requeued.append(tid)
            self._wake.set()
        if len(split.fresh) < self.cfg.tasks_per_batch:
            return False
        batch = split.fresh[: self.cfg.tasks_per_batch]  # oldest sampler first
        self._take(batch)
        result = await learner_step(self._learner, batch, step=self.step, config=self.cfg, emit=self._emit)
        if result.applied is None:  # cannot happen: every group in batch is fresh
            raise RuntimeError(f"step {self.step}: fresh batch produced no step")
        self.step += 1
        self.version = self.step
        self.sampler_path = result.applied.sampler_path
        self._wake.set()
        return True

    async def _dispatch(self, tg: asyncio.TaskGroup) -> None:
        """Start whole groups on the newest sampler whenever slots and the pacing bound allow."""
        while True:
            self._wake.clear()
            while self._can_start():
                task = await self._next_task()
                self._free -= self.cfg.group_size
                self._outstanding += 1
                tg.create_task(self._run_group(task, self.version, self.sampler_path))
            await self._wake.wait()

    async def run(self, max_steps: int | None = None) -> int:
        """Run until ``max_steps`` (default: the config's) learner steps are applied; returns the next step.
        Episodes still in flight at the end are cancelled (they were never trained on)."""
        target = self.cfg.max_steps if max_steps is None else max_steps
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._dispatch(tg))
                while self.step < target:
                    self._learn_wake.clear()
                    if not await self._learn_if_ready():
                        await self._learn_wake.wait()
                raise _Finished
        except* _Finished:
            pass
        log.info("outer.loop_done", step=self.step, requeued=len(self.requeued))
        return self.step


class _Finished(Exception):
    """Raised inside the task group to cancel the dispatcher and in-flight episodes once training is done."""
