"""The asynchronous off-policy outer loop: episodes keep running while the learner trains.

Sampling side: tasks come from a queue (re-queued stale tasks first, then fresh draws announced with
``batch.started``); each task runs as a *group* of ``group_size`` episodes started together on the newest
sampler, as soon as ``group_size`` of the ``episode_concurrency`` slots are free. Finished groups wait for the
learner. Sampling runs ahead of the learner by at most ``tasks_per_batch * (max_steps_off_policy + 1)`` groups
(pacing, so it does not pile up episodes that could only be discarded).

Pacing: no group starts while a learner step is in flight. A group started then would sample with version
``s`` while ``s + 1`` is at most one learner step away, and lose a whole step of its staleness window (it cannot
join step ``s`` any more); waiting for the new sampler costs a slot at most one learner step. A slot is freed as
soon as its episode ends, not when its whole group does, so one straggler holds one slot, not eight.

Learner side: as soon as ``tasks_per_batch`` finished groups are fresh enough for step ``s``, the oldest of them
train (:func:`learner_step`); stale ones are discarded and their tasks re-queued. One slow episode never gates
a batch: only whole, finished groups are waited for, and any ``tasks_per_batch`` of them make a batch.

Ids and the starting point come from the log (:class:`~handlers.training.projection.TrainingState`): each group
is announced with ``group.started`` (its episode ids, task and sampler) before any episode runs, so a resumed
loop re-launches the open groups with the same ids and sampler version, continues the task queue where the
crashed process left it, and never hands out an id twice. What "re-launch" means for an episode that already
ran (partly or wholly) is the ``run_episode`` callable's business (cli/outer_episodes.py reads it back
from the log). Episodes still in flight when the last step is applied are cancelled; they were never trained on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from engine.lazylog import lazy_logger
from events.learning import BatchStarted, GroupStarted, SamplerPublished
from handlers.ports.learner import LearnerPort
from handlers.training.batch import TaskRef, draw_tasks
from handlers.training.config import OuterConfig
from handlers.training.episodes import EpisodeGroup, FinishedEpisode
from handlers.training.meter import TrainingMeter
from handlers.training.projection import GroupState, TrainingState, episode_id_for, group_id_for, open_groups
from handlers.training.staleness import split_by_staleness
from handlers.training.step import Emit, discard_stale, learner_step

__all__ = ["OuterLoop", "RunEpisode"]

log = lazy_logger(__name__)

# (episode id, task, sampler version, sampler path) -> the finished episode (reward + sampled turns)
RunEpisode = Callable[[str, TaskRef, int, str], Awaitable[FinishedEpisode]]


class OuterLoop:
    #: pacing: start no group while a learner step is in flight (benchmarks/outer_sim.py compares both)
    pace_on_step = True

    def __init__(
        self,
        *,
        config: OuterConfig,
        learner: LearnerPort,
        run_episode: RunEpisode,
        emit: Emit,
        state: TrainingState | None = None,
        meter: TrainingMeter | None = None,
    ) -> None:
        """``state``: the training projection folded from the log so far (None: a new run). ``meter``: pays
        for each learner step (:mod:`handlers.training.meter`); None charges nothing."""
        st = state or TrainingState()
        self.cfg = config
        self._meter = meter
        self._learner = learner
        self._run_episode = run_episode
        self._emit = emit
        self.step = st.step
        self.version = st.sampler_version
        self.sampler_path = st.sampler_path
        # Applied but not published (a crash between the two events): publish on start.
        last = st.steps.get(str(st.step - 1))
        self._unpublished = last.sampler_path if last is not None and st.sampler_version < st.step else None
        self._queue: deque[TaskRef] = deque(TaskRef.parse(t) for t in st.queue)
        self._draws = st.draws
        self._episodes = st.next_episode
        self._groups = len(st.groups)
        self._resumed: list[GroupState] = open_groups(st)
        self._free = config.episode_concurrency
        self._outstanding = 0  # groups started and not yet trained or discarded
        self._done: list[EpisodeGroup] = []
        self._learning = False  # a learner step is in flight: a fresher sampler is coming
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
        return self._queue.popleft()

    async def _new_group(self, task: TaskRef, version: int, path: str) -> None:
        """Allocate the group's ids (synchronously: no other group can take them), announce it, run it."""
        ids = [episode_id_for(self._episodes + i) for i in range(self.cfg.group_size)]
        self._episodes += len(ids)
        group_id = group_id_for(self._groups)
        self._groups += 1
        await self._emit(
            GroupStarted(
                group_id=group_id, task_id=task.task_id, episode_ids=ids, sampler_version=version, sampler_path=path
            )
        )
        await self._run_group(task, version, path, ids)

    async def _run_group(self, task: TaskRef, version: int, path: str, ids: list[str]) -> None:
        episodes = await asyncio.gather(*(self._episode(i, task, version, path) for i in ids))
        self._done.append(EpisodeGroup(task_id=task.task_id, episodes=list(episodes)))
        self._learn_wake.set()

    async def _episode(self, episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
        """One episode; its slot is free as soon as it ends (a straggler holds one slot, not its group's)."""
        try:
            return await self._run_episode(episode_id, task, version, path)
        finally:
            self._free += 1
            self._wake.set()

    def _can_start(self) -> bool:
        ahead = self.cfg.tasks_per_batch * (self.cfg.max_steps_off_policy + 1)
        if self._learning and self.pace_on_step:
            return False  # a fresher sampler is at most one learner step away: start the group on it
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
                self._queue.appendleft(TaskRef.parse(tid))  # the training projection does the same
                self.requeued.append(tid)
            self._wake.set()
        if len(split.fresh) < self.cfg.tasks_per_batch:
            return False
        batch = split.fresh[: self.cfg.tasks_per_batch]  # oldest sampler first
        self._take(batch)
        self._learning = True
        try:
            result = await learner_step(
                self._learner, batch, step=self.step, config=self.cfg, emit=self._emit, meter=self._meter
            )
        finally:
            self._learning = False
        if result.applied is None:  # cannot happen: every group in batch is fresh
            raise RuntimeError(f"step {self.step}: fresh batch produced no step")
        self.step += 1
        self.version = self.step
        self.sampler_path = result.applied.sampler_path
        self._wake.set()
        return True

    async def _dispatch(self, tg: asyncio.TaskGroup) -> None:
        """Re-launch the groups a previous process left open, then start whole groups on the newest sampler
        whenever slots and the pacing bound allow."""
        for g in self._resumed:
            self._free -= len(g.episode_ids)
            self._outstanding += 1
            task = TaskRef.parse(g.task_id)
            tg.create_task(self._run_group(task, g.sampler_version, g.sampler_path, list(g.episode_ids)))
        self._resumed = []
        while True:
            self._wake.clear()
            while self._can_start():
                task = await self._next_task()
                self._free -= self.cfg.group_size
                self._outstanding += 1
                tg.create_task(self._new_group(task, self.version, self.sampler_path))
            await self._wake.wait()

    async def run(self, max_steps: int | None = None) -> int:
        """Run until ``max_steps`` (default: the config's) learner steps are applied; returns the next step.
        Episodes still in flight at the end are cancelled (they were never trained on)."""
        target = self.cfg.max_steps if max_steps is None else max_steps
        if self._unpublished is not None:
            await self._emit(SamplerPublished(sampler_version=self.step, path=self._unpublished, step=self.step - 1))
            self.version, self.sampler_path, self._unpublished = self.step, self._unpublished, None
        if self.step >= target:
            return self.step
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
