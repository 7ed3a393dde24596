"""The reward reactor: every finished episode gets exactly one ``reward.computed``.

An episode that did not validate is rewarded when it finishes; a validated one when its job succeeds or
fails. A multi-job episode (:mod:`handlers.reward.multi`) is rewarded once it has finished and every one of its
jobs has an outcome (at once when it named no final job). The inputs come from projections only (episodes,
baselines, rewards), so a resumed run computes the rewards it still owes and never a
second one for an episode already rewarded.

``post - best_pre`` only means something when both were scored on the same hidden tasks: a job scored on
a smoke subset (its ``eval_n`` metric) against baselines frozen on another number of tasks is refused,
loudly (``reward.refused`` in the logs, no reward), rather than rewarded with an artefact.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.runtime import Runtime
from events import BaselineFrozen, EpisodeFinished, EventBody, JobFailed, JobSucceeded, Recorded, RewardComputed
from handlers.episode.projection import EpisodesProjection, EpisodeState, owner_of
from handlers.fleet.queue import QueueProjection
from handlers.reward.baseline_projection import BaselinesProjection, best_pre
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward
from handlers.reward.multi import is_multi, multi_inputs
from handlers.reward.projection import RewardsProjection

__all__ = ["RewardReactor", "inputs_for", "mismatched_n"]

log = structlog.get_logger(__name__)


def inputs_for(ep: EpisodeState, *, best: float | None, job: JobSucceeded | JobFailed | None = None) -> RewardInputs:
    validated = ep.validated_attempt > 0
    common: dict[str, Any] = {
        "episode_id": ep.episode_id,
        "parseable": ep.parseable,
        "attempts": ep.validated_attempt if validated else ep.attempts,
        "validated": validated,
        "family": ep.family,
        "budget_refused": ep.reason.split(":", 1)[0] if ep.status == "budget_refused" else "",
    }
    if ep.job_id:
        common.update(job_id=ep.job_id, base_model=ep.job_model, time_budget_s=ep.job_time_budget_s or None)
    if isinstance(job, JobSucceeded):
        return RewardInputs(
            **common,
            job_status="succeeded",
            post=job.post,
            best_pre=best,
            train_seconds=job.train_seconds,
        )
    if isinstance(job, JobFailed):
        return RewardInputs(**common, job_status="failed", job_failure=job.reason)
    return RewardInputs(**common)


def mismatched_n(job: JobSucceeded, baseline_n: dict[str, int]) -> str:
    """Why ``job``'s post cannot be compared with these baselines (``{model: n}``), or "" when it can."""
    job_n = int(job.metrics.get("eval_n", 0))
    other = sorted({n for n in baseline_n.values() if n and n != job_n})
    if not job_n or not other:
        return ""  # one side does not state its n (older logs): nothing to compare
    return (
        f"job {job.job_id} was scored on {job_n} hidden tasks but best_pre on {other[0]}: uplift across "
        "different task sets is meaningless; freeze baselines on the same subset (eval_limit) or score the full set"
    )


def _episode_of(rt: Runtime, job_id: str) -> EpisodeState | None:
    """The episode that queued ``job_id``, from the queue's record of it (``job.queued`` names its episode).

    A lookup, not a scan: visiting every episode for each job outcome made a long run's rewards (and a resume's
    catch-up) quadratic in its episodes. A job the queue does not know (never queued) has no episode. A runtime
    without the queue projection (a test's harness, a tool's) is scanned, as before."""
    episodes: dict[str, EpisodeState] = rt.state(EpisodesProjection)
    queue = rt.states.get(QueueProjection.name)
    if queue is None:
        return owner_of(episodes, job_id) or next((e for e in episodes.values() if e.job_id == job_id), None)
    entry = queue.jobs.get(job_id)
    return episodes.get(entry.episode_id) if entry is not None else None


class RewardReactor:
    """Run with ``runtime.start_reactor(RewardReactor(config))``."""

    def __init__(self, config: RewardConfig | None = None) -> None:
        self.config = config or RewardConfig()
        self.baseline_n: dict[str, dict[str, int]] = {}  # family -> model -> n, from the baseline.frozen seen
        self.refused: dict[str, str] = {}  # episode id -> why no reward was computed

    async def __call__(self, rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        async for rec in stream:
            await self._observe(rt, rec)

    #: the event types :meth:`_observe` acts on: a catch-up needs only these records of the log
    observes: tuple[type[EventBody], ...] = (BaselineFrozen, EpisodeFinished, JobSucceeded, JobFailed)

    async def catch_up(self, rt: Runtime, records: Iterable[Recorded]) -> int:
        """On resume: reward what the log owes a reward (a crash between an episode's or a job's end and its
        ``reward.computed``); the reactor only sees events recorded from now on. Returns how many it emitted."""
        before = len(rt.state(RewardsProjection))
        for rec in records:
            await self._observe(rt, rec)
        return len(rt.state(RewardsProjection)) - before

    async def _observe(self, rt: Runtime, rec: Recorded) -> None:
        """One record, live or caught up: note a baseline's n, reward what this record completes."""
        ev = rec.event
        if isinstance(ev, BaselineFrozen):
            self.baseline_n.setdefault(ev.family, {})[ev.model] = ev.n
        if isinstance(ev, EpisodeFinished) and is_multi(rt.state(EpisodesProjection)[ev.episode_id]):
            await self._reward_multi(rt, ev.episode_id)
        elif isinstance(ev, EpisodeFinished) and ev.status != "validated":
            await self._reward(rt, ev.episode_id, None)
        elif isinstance(ev, JobSucceeded | JobFailed):
            await self._reward_job(rt, ev)

    async def _reward_job(self, rt: Runtime, job: JobSucceeded | JobFailed) -> None:
        owner = _episode_of(rt, job.job_id)
        if owner is not None and job.job_id in owner.jobs:
            await self._reward_multi(rt, owner.episode_id)
        elif owner is not None and owner.job_id == job.job_id:
            await self._reward(rt, owner.episode_id, job)

    async def _reward_multi(self, rt: Runtime, episode_id: str) -> None:
        if episode_id in rt.state(RewardsProjection):
            return
        ep: EpisodeState = rt.state(EpisodesProjection)[episode_id]
        frozen = rt.state(BaselinesProjection)
        best = best_pre(frozen, ep.family)
        inputs = multi_inputs(ep, best=best)
        if inputs is None:
            return  # not due yet: its jobs' outcomes will call again
        if inputs.job_status == "succeeded" and best is None:
            log.error("reward.no_baseline", family=ep.family, episode_id=episode_id)
            return
        await rt.emit(compute_reward(inputs, self.config))

    async def _reward(
        self, rt: Runtime, episode_id: str, job: JobSucceeded | JobFailed | None
    ) -> RewardComputed | None:
        if episode_id in rt.state(RewardsProjection):
            return None  # already rewarded (a resumed run replays its outcome events)
        ep: EpisodeState = rt.state(EpisodesProjection)[episode_id]
        frozen = rt.state(BaselinesProjection)
        best = best_pre(frozen, ep.family)
        if isinstance(job, JobSucceeded) and best is None:
            log.error("reward.no_baseline", family=ep.family, episode_id=episode_id)
            self.refused[episode_id] = f"no frozen baseline for {ep.family} in this run"
            return None
        if isinstance(job, JobSucceeded) and (why := mismatched_n(job, self.baseline_n.get(ep.family, {}))):
            log.error("reward.refused", family=ep.family, episode_id=episode_id, why=why)
            self.refused[episode_id] = why
            return None
        inputs = inputs_for(ep, best=best, job=job)
        body = compute_reward(inputs, self.config)
        await rt.emit(body)
        return body
