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

Learner side: as soon as ``tasks_per_batch`` whole finished groups are fresh enough for step ``s``, the oldest
``tasks_per_batch`` groups train (:func:`learner_step`), counting the groups still running at their *last fresh
step* (``s - v = K``: after ``s`` they are too stale to train) of which at least ``[outer] min_group_fraction``
of the episodes have finished: such a group is closed short (``group.closed_short``, the decision is in the
log), trains with the episodes it has (its GRPO baseline is their mean), and its stragglers are cancelled and
counted as discarded. Without that, one straggler in a group of 8 wasted the other 7 (docs/performance.md,
"Outer loop"). Groups that missed their last fresh step are discarded at once, running or finished (running
ones cancelled rather than run to the end for nothing), and their tasks re-queued. One slow episode never gates
a batch: any ``tasks_per_batch`` whole groups make one.

Ids and the starting point come from the log (:class:`~handlers.training.projection.TrainingState`): each group
is announced with ``group.started`` (its episode ids, task and sampler) before any episode runs, so a resumed
loop re-launches the open groups with the same ids and sampler version, continues the task queue where the
crashed process left it, and never hands out an id twice; a group closed short is re-launched with the
episodes it kept only. What "re-launch" means for an episode that already ran (partly or wholly) is the
``run_episode`` callable's business (cli/outer_episodes.py reads it back from the log). Episodes still in
flight when the last step is applied are cancelled; they were never trained on.

An episode dropped for good (a straggler of a group closed short, an unfinished member of a missed group) may
have an inner job queued or running on a pod, paid for a result nobody will read: ``drop_jobs`` is told the
episode ids right after their tasks are told to stop (cli/outer_episodes.py asks the fleet to cancel their
jobs). Episodes in flight at the end of the run are not dropped: a later ``ait resume`` with more steps
re-launches their groups and reads their jobs' results.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Awaitable, Callable

from engine.lazylog import lazy_logger
from events.learning import BatchStarted, GroupClosedShort, GroupStarted, SamplerPublished
from handlers.ports.learner import LearnerPort
from handlers.training.batch import TaskRef, draw_tasks
from handlers.training.config import OuterConfig
from handlers.training.episodes import EpisodeGroup, FinishedEpisode
from handlers.training.meter import TrainingMeter
from handlers.training.projection import GroupState, TrainingState, episode_id_for, group_id_for, open_groups
from handlers.training.staleness import is_fresh, split_by_staleness
from handlers.training.step import Emit, discard_episode, discard_stale, learner_step

__all__ = ["DropJobs", "OuterLoop", "RunEpisode"]

log = lazy_logger(__name__)

# (episode id, task, sampler version, sampler path) -> the finished episode (reward + sampled turns)
RunEpisode = Callable[[str, TaskRef, int, str], Awaitable[FinishedEpisode]]
# (episode ids dropped for good, why) -> their inner jobs are no longer wanted
DropJobs = Callable[[list[str], str], Awaitable[None]]


async def _keep_jobs(episode_ids: list[str], reason: str) -> None:
    """No fleet to tell (the loop's own tests, the simulator): a dropped episode's job is left alone."""


class _Running:
    """A group in flight: its episodes' tasks and the episodes finished so far."""

    def __init__(self, group_id: str, task: TaskRef, version: int, path: str, ids: list[str]) -> None:
        self.group_id = group_id
        self.task = task
        self.version = version
        self.path = path
        self.ids = ids
        self.finished: dict[str, FinishedEpisode] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.entered: set[str] = set()  # episodes whose task began to run (their slot is freed on the way out)
        self.closed = False  # closed short or discarded: later results are not its members
        self.short = False  # closed short by an earlier process: re-runs what it kept, never closes again

    def finished_group(self) -> EpisodeGroup:
        episodes = [self.finished[i] for i in self.ids if i in self.finished]
        return EpisodeGroup(task_id=self.task.task_id, episodes=episodes)

    def unfinished(self) -> list[str]:
        """Its episodes with no result (yet), in id order."""
        return [i for i in self.ids if i not in self.finished]

    def cancel_unfinished(self) -> None:
        for eid, task in self.tasks.items():
            if eid not in self.finished:
                task.cancel()


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
        drop_jobs: DropJobs = _keep_jobs,
    ) -> None:
        """``state``: the training projection folded from the log so far (None: a new run). ``meter``: pays
        for each learner step (:mod:`handlers.training.meter`); None charges nothing. ``drop_jobs``: told the
        episodes dropped for good, whose inner jobs nobody wants any more."""
        st = state or TrainingState()
        self.cfg = config
        self._drop_jobs = drop_jobs
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
        self._running: dict[str, _Running] = {}  # group id -> group with episodes still running, oldest first
        self._done: list[EpisodeGroup] = []
        self._learning = False  # a learner step is in flight: a fresher sampler is coming
        self._wake = asyncio.Event()  # dispatcher: slots freed, a new sampler, tasks re-queued
        self._learn_wake = asyncio.Event()  # learner: an episode finished
        self._tg: asyncio.TaskGroup | None = None
        self.requeued: list[str] = []
        self.closed_short = 0  # groups trained without their stragglers (this process)

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
        self._launch(_Running(group_id, task, version, path, ids))

    def _launch(self, group: _Running) -> None:
        assert self._tg is not None
        self._running[group.group_id] = group
        for eid in group.ids:
            task = self._tg.create_task(self._episode(group, eid))
            # A task cancelled before its first step never enters its body (nor its ``finally``).
            task.add_done_callback(functools.partial(self._never_ran, group, eid))
            group.tasks[eid] = task

    def _slot_freed(self) -> None:
        """An episode ended (or was cancelled): its slot is free (a straggler holds one slot, not its group's)."""
        self._free += 1
        self._wake.set()

    def _never_ran(self, group: _Running, episode_id: str, _task: asyncio.Task[None]) -> None:
        if episode_id not in group.entered:
            self._slot_freed()

    async def _episode(self, group: _Running, episode_id: str) -> None:
        group.entered.add(episode_id)
        try:
            ep = await self._run_episode(episode_id, group.task, group.version, group.path)
        except Exception as exc:
            current = asyncio.current_task()
            if current is None or not current.cancelling():
                raise
            # Cancelled by the loop (a straggler, a missed group, the run's end) and failing on its way out: it
            # is no longer the run's business, so it must not fail the run (as it could not inside a gather).
            log.warning("outer.episode_error_on_cancel", episode_id=episode_id, error=f"{type(exc).__name__}: {exc}")
            raise asyncio.CancelledError from exc
        finally:
            self._slot_freed()  # before the learner hears of it: the dispatcher may start a group first
        if group.closed:
            return
        group.finished[episode_id] = ep
        if len(group.finished) == len(group.ids):
            del self._running[group.group_id]
            self._done.append(group.finished_group())
        self._learn_wake.set()  # a whole group, or one more episode of a group that may close short

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

    def _requeue(self, task_ids: list[str]) -> None:
        for tid in task_ids:
            self._queue.appendleft(TaskRef.parse(tid))  # the training projection does the same
            self.requeued.append(tid)
        if task_ids:
            self._wake.set()

    async def _discard_missed(self) -> None:
        """Discard every group past its last fresh step: finished ones, and running ones (cancelled now rather
        than run to the end for nothing); their tasks are re-queued."""
        k = self.cfg.max_steps_off_policy
        stale = split_by_staleness(self._done, self.step, k).stale
        missed = [g for g in self._running.values() if not is_fresh(self.step, g.version, k)]
        if not stale and not missed:
            return
        self._take(stale)
        for g in missed:
            g.closed = True
            del self._running[g.group_id]
            self._outstanding -= 1
        self._requeue(await discard_stale(stale, step=self.step, config=self.cfg, emit=self._emit))
        for g in missed:
            for eid in g.ids:
                await discard_episode(eid, g.task.task_id, g.version, step=self.step, config=self.cfg, emit=self._emit)
            g.cancel_unfinished()
            self._requeue([g.task.task_id])
            await self._drop_jobs(g.unfinished(), f"group {g.group_id} missed its last fresh step (step {self.step})")

    def _pick_batch(self) -> tuple[list[EpisodeGroup], list[_Running]] | None:
        """None until ``tasks_per_batch`` whole groups are fresh; then the oldest ``tasks_per_batch`` of them and
        of the groups at their last fresh step that may close short (whole ones first within a sampler): the
        finished ones to take and the running ones to close short.

        Short groups do not make a batch ready on their own: closing them whenever they could would step the
        learner sooner, shorten every group's staleness window in wall time and drop more stragglers
        (benchmarks/outer_sim.py: 2.5% instead of 3.7% of episodes discarded at 40 slots, same throughput)."""
        k, need = self.cfg.max_steps_off_policy, self.cfg.tasks_per_batch
        if any(g.short for g in self._running.values()):
            # Re-launched after a crash: it was closed short for this very step; its members had finished, so
            # they come back from the log at once. Wait for them, so the step trains what the log decided.
            return None
        fresh = split_by_staleness(self._done, self.step, k).fresh
        if len(fresh) < need:
            return None
        short = [
            g
            for g in self._running.values()
            if len(g.finished) >= self.cfg.min_group_episodes and not is_fresh(self.step + 1, g.version, k)
        ]
        ranked: list[tuple[int, int, int, EpisodeGroup | _Running]] = [
            (g.sampler_version, 0, i, g) for i, g in enumerate(fresh)
        ]
        ranked += [(g.version, 1, i, g) for i, g in enumerate(short)]
        ranked.sort(key=lambda r: r[:3])
        chosen = [r[3] for r in ranked[:need]]
        return [g for g in chosen if isinstance(g, EpisodeGroup)], [g for g in chosen if isinstance(g, _Running)]

    async def _close_short(self, group: _Running) -> EpisodeGroup:
        """Train ``group`` with the episodes it has; its stragglers are cancelled (recorded first)."""
        group.closed = True
        del self._running[group.group_id]
        self._outstanding -= 1
        kept, dropped = group.finished_group(), group.unfinished()  # closed: neither changes any more
        await self._emit(
            GroupClosedShort(
                group_id=group.group_id,
                step=self.step,
                episode_ids=[ep.episode_id for ep in kept.episodes],
                dropped_episode_ids=dropped,
                task_id=group.task.task_id,
                sampler_version=group.version,
            )
        )
        group.cancel_unfinished()
        self.closed_short += 1
        await self._drop_jobs(dropped, f"straggler of group {group.group_id}, closed short at step {self.step}")
        return kept

    async def _learn_if_ready(self) -> bool:
        """Discard what is too stale for this step; train if a batch is ready. True if a step was applied."""
        await self._discard_missed()
        picked = self._pick_batch()
        if picked is None:
            return False
        whole, short = picked
        self._take(whole)  # before any await: groups keep arriving
        batch = whole + [await self._close_short(g) for g in short]
        # Oldest sampler first, then in the order the groups were started (not the order they finished: the
        # datums' order is the gradient's summation order, and a rerun or a resume must sum the same way).
        batch.sort(key=lambda g: (g.sampler_version, g.episodes[0].episode_id))
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

    async def _dispatch(self) -> None:
        """Re-launch the groups a previous process left open, then start whole groups on the newest sampler
        whenever slots and the pacing bound allow."""
        assert self._tg is not None
        resumed, self._resumed = self._resumed, []
        for g in resumed:
            members = g.members  # a group closed short re-runs the episodes it kept only
            self._free -= len(members)
            self._outstanding += 1
            group = _Running(g.group_id, TaskRef.parse(g.task_id), g.sampler_version, g.sampler_path, members)
            group.short = bool(g.dropped)
            self._launch(group)
        for g in resumed:
            if g.dropped:  # the previous process may have stopped before it asked (asking twice changes nothing)
                await self._drop_jobs(list(g.dropped), f"straggler of group {g.group_id}, closed short")
        while True:
            self._wake.clear()
            while self._can_start():
                task = await self._next_task()
                self._free -= self.cfg.group_size
                self._outstanding += 1
                self._tg.create_task(self._new_group(task, self.version, self.sampler_path))
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
                self._tg = tg
                tg.create_task(self._dispatch())
                while self.step < target:
                    self._learn_wake.clear()
                    if not await self._learn_if_ready():
                        await self._learn_wake.wait()
                raise _Finished
        except* _Finished:
            pass
        finally:
            self._tg = None
        log.info("outer.loop_done", step=self.step, requeued=len(self.requeued), closed_short=self.closed_short)
        return self.step


class _Finished(Exception):
    """Raised inside the task group to cancel the dispatcher and in-flight episodes once training is done."""
