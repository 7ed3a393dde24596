"""What a resumed ``ait train`` needs from the log before its snapshot, kept as a snapshotted view.

On resume the rewarder catches up on the outcomes a crash left unrewarded (it acts on ``baseline.frozen``,
``episode.finished``, ``job.succeeded`` and ``job.failed``) and the episodes the resumed step reopens continue
from their own events. Both used to read the whole log. This projection keeps, as the log's own lines:

- every ``baseline.frozen`` (few: the rewarder's baseline sizes come from them);
- the events naming an episode (a top-level ``episode_id``) while that episode has no ``reward.computed``;
- the outcome of every job whose episode has no reward yet (its episode: the ``job.queued`` that named it;
  an outcome of a job no ``job.queued`` named is kept whatever happens).

A record left out is one the rewarder does nothing with (its ``_observe`` returns at once for an episode
already rewarded) and whose episode's history no resume reads (only unrewarded episodes are continued), so
:func:`catch_up_records` and :func:`histories` give what the full read gave, where it is used. The runtime of
``ait train`` folds it as a view (``Runtime(views=...)``: snapshotted, out of the state hash): a resume reads the
snapshot and the log after it, not the whole log. Its size follows the episodes in flight, not the log.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from engine.projection import Projection, handles
from events import (
    BaselineFrozen,
    EpisodeFinished,
    EventBody,
    JobFailed,
    JobQueued,
    JobSucceeded,
    Recorded,
    RewardComputed,
    registered_types,
)
from events.codec import RecordCodec

__all__ = ["ResumeState", "ResumeView", "catch_up_records", "histories"]

_CODEC = RecordCodec()
_FINISHED = f'"type":"{EpisodeFinished.type}"'

# Every event type with an ``episode_id`` field (what handlers.episode.resume.episode_histories collects).
_NAMING = tuple(
    cls
    for cls in registered_types().values()
    if "episode_id" in cls.__struct_fields__
    and cls not in (RewardComputed, JobQueued, JobSucceeded, JobFailed, BaselineFrozen)  # handled below
)


class ResumeState(msgspec.Struct, kw_only=True):
    baselines: list[str] = []  # baseline.frozen lines
    episodes: dict[str, list[str]] = {}  # unrewarded episode -> its events' lines, in log order
    outcomes: dict[str, list[str]] = {}  # unrewarded episode ("": a job no job.queued named) -> its jobs' outcomes
    job_episode: dict[str, str] = {}  # job -> the episode its job.queued named
    rewarded: set[str] = set()


def _line(rec: Recorded) -> str:
    return _CODEC.encode(rec).decode()


class ResumeView(Projection[ResumeState]):
    name = "resume"
    state_type = ResumeState

    def initial(self) -> ResumeState:
        return ResumeState()

    def _naming(self, s: ResumeState, episode_id: object) -> None:
        # An empty id (a cost outside any episode) names no episode a resume continues.
        if isinstance(episode_id, str) and episode_id and episode_id not in s.rewarded:
            s.episodes.setdefault(episode_id, []).append(_line(self.current))

    @handles(*_NAMING)
    def _event(self, s: ResumeState, e: EventBody) -> ResumeState:
        self._naming(s, getattr(e, "episode_id", None))
        return s

    @handles(JobQueued)
    def _queued(self, s: ResumeState, e: JobQueued) -> ResumeState:
        s.job_episode[e.job_id] = e.episode_id
        self._naming(s, e.episode_id)
        return s

    @handles(JobSucceeded, JobFailed)
    def _outcome(self, s: ResumeState, e: JobSucceeded | JobFailed) -> ResumeState:
        episode_id = s.job_episode.get(e.job_id, "")
        if episode_id not in s.rewarded:
            s.outcomes.setdefault(episode_id, []).append(_line(self.current))
        self._naming(s, getattr(e, "episode_id", None))
        return s

    @handles(BaselineFrozen)
    def _baseline(self, s: ResumeState, e: BaselineFrozen) -> ResumeState:
        s.baselines.append(_line(self.current))
        self._naming(s, getattr(e, "episode_id", None))
        return s

    @handles(RewardComputed)
    def _rewarded(self, s: ResumeState, e: RewardComputed) -> ResumeState:
        s.rewarded.add(e.episode_id)
        s.episodes.pop(e.episode_id, None)
        s.outcomes.pop(e.episode_id, None)
        return s


def _decode(lines: Iterable[str]) -> list[Recorded]:
    return [_CODEC.decode(line.encode()) for line in lines]


def catch_up_records(s: ResumeState) -> list[Recorded]:
    """The records the rewarder's catch-up must see, in log order (``RewardReactor.observes`` of the log, less
    those of episodes already rewarded)."""
    records = _decode([*s.baselines, *(line for ls in s.outcomes.values() for line in ls)])
    finished = _decode(line for ls in s.episodes.values() for line in ls if _FINISHED in line)
    records += [r for r in finished if isinstance(r.event, EpisodeFinished)]
    return sorted(records, key=lambda r: r.seq)


def histories(s: ResumeState, episode_ids: Iterable[str]) -> dict[str, list[EventBody]]:
    """Each unrewarded episode's events in log order (empty for one already rewarded, which no resume continues)."""
    return {e: [r.event for r in _decode(s.episodes.get(e, []))] for e in set(episode_ids)}
