"""What an earlier holdout arm left in a run's log, for ``ait holdout --continue``.

An arm is the episodes of one sampler version on one held-out family (group ``holdout-v<N>``). An interrupted
arm (a crash, Ctrl-C, a lost machine) leaves episodes started and never rewarded; ``--continue`` carries each on
from where its log stops, as ``ait resume`` does for the outer loop's episodes (its events, replayed by
:func:`handlers.episode.resume.resume_point`), and first rewards what the log already owes one (an outcome
recorded just before the crash, its ``reward.computed`` not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from events import (
    BaselineFrozen,
    EpisodeFinished,
    EpisodeStarted,
    EventBody,
    JobFailed,
    JobQueued,
    JobSucceeded,
    Recorded,
    RewardComputed,
)
from handlers.episode.resume import episode_histories

__all__ = ["ArmState", "read_arm"]


@dataclass(frozen=True)
class ArmState:
    group: str  # holdout-v<N>
    family: str
    rewarded: list[str]  # the arm's episodes with a reward, in start order
    unfinished: list[tuple[str, str]]  # (episode id, task id) of those with none, in start order
    histories: dict[str, list[EventBody]]  # each unfinished episode's events: where a continuation picks it up
    owed: list[Recorded]  # what the rewarder must see again: the unfinished episodes' outcomes, the baselines


def read_arm(records: Sequence[Recorded], group: str, family: str) -> ArmState:
    """The arm ``group`` on ``family`` as ``records`` (a whole log, in order) leave it."""
    started = [
        r.event
        for r in records
        if isinstance(r.event, EpisodeStarted) and r.event.group_id == group and r.event.family == family
    ]
    rewarded = {r.event.episode_id for r in records if isinstance(r.event, RewardComputed)}
    unfinished = [(e.episode_id, e.task_id) for e in started if e.episode_id not in rewarded]
    open_ids = {eid for eid, _ in unfinished}
    jobs = {r.event.job_id for r in records if isinstance(r.event, JobQueued) and r.event.episode_id in open_ids}
    owed = [
        r
        for r in records
        if isinstance(r.event, BaselineFrozen)
        or (isinstance(r.event, EpisodeFinished) and r.event.episode_id in open_ids)
        or (isinstance(r.event, JobSucceeded | JobFailed) and r.event.job_id in jobs)
    ]
    return ArmState(
        group=group,
        family=family,
        rewarded=[e.episode_id for e in started if e.episode_id in rewarded],
        unfinished=unfinished,
        histories=episode_histories(records, open_ids),
        owed=owed,
    )
