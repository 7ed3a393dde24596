"""The outer-training projection: everything the outer loop needs to carry on from the log alone.

A pure fold of the learning events (``batch.started``, ``group.started``, ``group.closed_short``,
``episode.stale_discarded``, ``batch.collected``, ``lora.step_applied``, ``sampler.published``) and of the
episode events of the loop's groups (started, turns, finished, rewarded). From it a resumed run takes

- the task queue: tasks drawn by ``batch.started`` and not yet started as a group, with re-queued (stale)
  tasks in front, in the order the live loop keeps them;
- the next free episode and group ids and the number of draws so far (ids never repeat across processes);
- the learner's position: the next step, the newest published sampler (version and path) and the last
  ``state_path`` to restore weights + optimizer state from;
- the open groups (neither trained nor discarded) with their episodes' progress, to re-launch with the same
  ids and the sampler version they started with; a group closed short (``group.closed_short``) re-launches
  only the episodes it kept.

Episodes outside the loop's groups (``ait episode``, a holdout arm) are not tracked here.
"""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import (
    AgentTurnTaken,
    BatchCollected,
    BatchStarted,
    EpisodeFinished,
    EpisodeStaleDiscarded,
    EpisodeStarted,
    GroupClosedShort,
    GroupStarted,
    LoRAStepApplied,
    RewardComputed,
    SamplerPublished,
)

__all__ = [
    "EpisodeProgress",
    "GroupState",
    "StepRecord",
    "TrainingProjection",
    "TrainingState",
    "episode_id_for",
    "group_id_for",
    "open_groups",
]


def episode_id_for(n: int) -> str:
    return f"ep{n:06d}"


def group_id_for(n: int) -> str:
    return f"g{n:06d}"


class GroupState(msgspec.Struct, kw_only=True):
    group_id: str
    task_id: str
    episode_ids: list[str]
    sampler_version: int
    sampler_path: str = ""
    status: str = "running"  # running | trained | discarded
    step: int = -1  # the learner step it trained at, or was found too stale at
    dropped: list[str] = []  # closed short: the stragglers left out (episode_ids minus these is the group)

    @property
    def members(self) -> list[str]:
        """The episodes the group trains with: all of them, or the ones kept when it was closed short."""
        if not self.dropped:
            return self.episode_ids
        gone = set(self.dropped)
        return [e for e in self.episode_ids if e not in gone]


class EpisodeProgress(msgspec.Struct, kw_only=True):
    group_id: str
    started: bool = False
    status: str = ""  # the episode.finished status ("": not finished)
    reward: float | None = None
    turn_blobs: list[str] = []  # agent.turn_taken blobs in turn order (they hold the sampled tokens)


class StepRecord(msgspec.Struct, kw_only=True):
    step: int
    episode_ids: list[str] = []
    capped_episode_ids: list[str] = []  # collected but left out: ended by the run or global budget cap
    state_path: str = ""
    sampler_path: str = ""
    n_datums: int = 0
    n_episodes: int = 0
    n_tokens: int = 0
    applied: bool = False


class TrainingState(msgspec.Struct, kw_only=True):
    draws: int = 0  # batch.started so far: the next draw's index
    queue: list[str] = []  # task ids waiting for a group, front first
    next_episode: int = 0
    groups: dict[str, GroupState] = {}
    episodes: dict[str, EpisodeProgress] = {}
    steps: dict[str, StepRecord] = {}  # str(step) -> its batch and LoRA step
    step: int = 0  # the next learner step
    sampler_version: int = 0  # the newest published sampler (0: the base model)
    sampler_path: str = ""
    resume_state_path: str = ""  # the last lora.step_applied state_path (weights + optimizer state)
    requeued: list[str] = []  # task ids re-queued after a stale discard, in order
    discarded_episodes: int = 0  # stale groups' episodes and the stragglers of groups closed short
    short_groups: int = 0  # groups closed short (trained without their stragglers)
    capped_episodes: int = 0  # left out of the steps applied: ended by the run or global budget cap


def open_groups(state: TrainingState) -> list[GroupState]:
    """Groups started and neither trained nor discarded, oldest first (ids are zero-padded: they sort)."""
    return [state.groups[g] for g in sorted(state.groups) if state.groups[g].status == "running"]


class TrainingProjection(Projection[TrainingState]):
    name = "training"
    state_type = TrainingState

    def initial(self) -> TrainingState:
        return TrainingState()

    @handles(BatchStarted)
    def _batch(self, s: TrainingState, e: BatchStarted) -> TrainingState:
        s.draws = max(s.draws, e.step + 1)
        s.queue.extend(e.task_ids)
        return s

    @handles(GroupStarted)
    def _group(self, s: TrainingState, e: GroupStarted) -> TrainingState:
        if e.group_id in s.groups:
            return s
        if e.task_id in s.queue:  # the loop pops the front; an unknown task is kept as it says
            s.queue.remove(e.task_id)
        s.groups[e.group_id] = GroupState(
            group_id=e.group_id,
            task_id=e.task_id,
            episode_ids=list(e.episode_ids),
            sampler_version=e.sampler_version,
            sampler_path=e.sampler_path,
        )
        for eid in e.episode_ids:
            s.episodes[eid] = EpisodeProgress(group_id=e.group_id)
        s.next_episode += len(e.episode_ids)
        return s

    @handles(EpisodeStarted)
    def _started(self, s: TrainingState, e: EpisodeStarted) -> TrainingState:
        ep = s.episodes.get(e.episode_id)
        if ep is not None:
            ep.started = True
        return s

    @handles(AgentTurnTaken)
    def _turn(self, s: TrainingState, e: AgentTurnTaken) -> TrainingState:
        ep = s.episodes.get(e.episode_id)
        if ep is not None and e.turn == len(ep.turn_blobs):
            ep.turn_blobs.append(e.blob)
        return s

    @handles(EpisodeFinished)
    def _finished(self, s: TrainingState, e: EpisodeFinished) -> TrainingState:
        ep = s.episodes.get(e.episode_id)
        if ep is not None:
            ep.status = e.status
        return s

    @handles(RewardComputed)
    def _reward(self, s: TrainingState, e: RewardComputed) -> TrainingState:
        ep = s.episodes.get(e.episode_id)
        if ep is not None and ep.reward is None:
            ep.reward = e.reward
        return s

    @handles(EpisodeStaleDiscarded)
    def _stale(self, s: TrainingState, e: EpisodeStaleDiscarded) -> TrainingState:
        ep = s.episodes.get(e.episode_id)
        group = s.groups.get(ep.group_id) if ep is not None else None
        if group is None or group.status != "running":
            return s
        # One event per episode; the group's task goes back to the front once, as the live loop does.
        group.status, group.step = "discarded", e.step
        s.discarded_episodes += len(group.members)
        if e.requeued:
            s.queue.insert(0, group.task_id)
            s.requeued.append(group.task_id)
        return s

    @handles(GroupClosedShort)
    def _short(self, s: TrainingState, e: GroupClosedShort) -> TrainingState:
        group = s.groups.get(e.group_id)
        if group is None or group.status != "running" or group.dropped:
            return s
        group.dropped = [i for i in e.dropped_episode_ids if i in group.episode_ids]
        s.discarded_episodes += len(group.dropped)
        s.short_groups += 1
        return s

    @handles(BatchCollected)
    def _collected(self, s: TrainingState, e: BatchCollected) -> TrainingState:
        # The groups stay open until the step is applied: a crash in between collects them again.
        s.steps[str(e.step)] = StepRecord(
            step=e.step, episode_ids=list(e.episode_ids), capped_episode_ids=list(e.capped_episode_ids)
        )
        return s

    @handles(LoRAStepApplied)
    def _applied(self, s: TrainingState, e: LoRAStepApplied) -> TrainingState:
        rec = s.steps.setdefault(str(e.step), StepRecord(step=e.step))
        rec.state_path, rec.sampler_path, rec.applied = e.state_path, e.sampler_path, True
        s.capped_episodes += len(rec.capped_episode_ids)
        for eid in [*rec.episode_ids, *rec.capped_episode_ids]:  # a capped episode's group is done with too
            ep = s.episodes.get(eid)
            group = s.groups.get(ep.group_id) if ep is not None else None
            if group is not None and group.status == "running":
                group.status, group.step = "trained", e.step
        rec.n_datums, rec.n_episodes, rec.n_tokens = e.n_datums, e.n_episodes, e.n_tokens
        s.step = max(s.step, e.step + 1)
        if e.state_path:
            s.resume_state_path = e.state_path
        return s

    @handles(SamplerPublished)
    def _published(self, s: TrainingState, e: SamplerPublished) -> TrainingState:
        if e.sampler_version >= s.sampler_version:
            s.sampler_version, s.sampler_path = e.sampler_version, e.path
        return s
