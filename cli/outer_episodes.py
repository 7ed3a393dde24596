"""The outer loop's ``run_episode``: one episode of a GRPO group, run (or continued from the log) to its reward.

New episode: the task's spec, the template workspace and opening messages, a policy bound to the group's
sampler version, the episode runner; a validated submission queues its job (``job-<episode id>``), which the
run's dispatcher runs on a pod; the reward reactor rewards it. The learner gets back the reward and the
sampled turns read from the turn blobs.

Resumed episode (its ``episode.started`` is in the log): it continues from its last recorded turn
(:mod:`handlers.episode.resume`) with the sampler version it started with; an episode that already finished is
not run again; a validated one whose job never made it into the queue gets it queued now; one whose job is
queued or on a pod just waits (the dispatcher reconciles the job, it is not relaunched); one already rewarded
returns at once.

An episode the loop drops for good (a straggler, an unfinished member of a missed group) has its jobs that are
not final cancelled (``job.cancel_requested``): the fleet stops them instead of running them to the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from cli.train_config import RunConfig
from engine.blobs import BlobStore
from engine.runtime import Runtime
from events import EventBody, JobCancelRequested, JobQueued
from families.spec import TaskSpec, load_spec
from handlers.budget.rules import BudgetGate
from handlers.episode.projection import EpisodesProjection
from handlers.episode.resume import resume_point
from handlers.episode.runner import EpisodeOutcome, EpisodeRunner, EpisodeSetup
from handlers.episode.setup import opening_messages, template_files
from handlers.fleet.queue import FINAL, QueueProjection, duration_estimate
from handlers.ports.policy import AgentPolicy
from handlers.ports.validator import Validator
from handlers.reward.baseline_projection import BaselinesProjection
from handlers.reward.projection import RewardsProjection
from handlers.training import FinishedEpisode, TaskRef
from handlers.training.episodes import turn_from_training
from handlers.training.projection import TrainingProjection

__all__ = ["CAPS", "OuterEpisodes", "PolicyFactory"]

#: The budgets whose refusal says nothing about the policy: an episode they end is left out of the batch.
CAPS = ("run", "global")

log = structlog.get_logger(__name__)

# (episode id, family, sampler version, sampler path) -> a policy bound to that sampler for that episode (the
# episode id lets a policy seed its sampling per episode: reproducible whatever order the episodes run in)
PolicyFactory = Callable[[str, str, int, str], Awaitable[AgentPolicy]]


class OuterEpisodes:
    def __init__(
        self,
        rt: Runtime,
        cfg: RunConfig,
        *,
        policy_for: PolicyFactory,
        validator: Validator,
        gate: BudgetGate | None,
        histories: dict[str, list[EventBody]] | None = None,
        group_prefix: str = "",
    ) -> None:
        self.rt = rt
        self.cfg = cfg
        self.blobs = BlobStore(rt.directory / "blobs")
        self.policy_for = policy_for
        self.validator = validator
        self.gate = gate
        self.histories = histories or {}  # episode id -> its events before this process (resumed episodes)
        self.group_prefix = group_prefix  # "holdout": a holdout arm's episodes, in no outer group
        self._specs: dict[str, tuple[TaskSpec, bytes]] = {}

    def _spec(self, family: str) -> tuple[TaskSpec, bytes]:
        if family not in self._specs:
            path = self.cfg.spec_path(family)
            self._specs[family] = (load_spec(path), path.read_bytes())
        return self._specs[family]

    def _setup(self, episode_id: str, task: TaskRef, version: int, group_id: str) -> EpisodeSetup:
        spec, spec_json = self._spec(task.family)
        files = template_files(
            spec,
            max_attempts=self.cfg.episode.max_attempts,
            reward=self.cfg.reward,
            template_dir=self.cfg.template_dir,
        )
        return EpisodeSetup(
            episode_id=episode_id,
            task_id=task.task_id,
            spec=spec,
            spec_json=spec_json,
            workspace=self.rt.directory / "episodes" / episode_id / "workspace",
            initial_files=files,
            messages=opening_messages(spec, files),
            baselines=self.cfg.baselines.get(task.family, {}) or _frozen(self.rt, task.family),
            max_turns=self.cfg.episode.max_turns,
            max_attempts=self.cfg.episode.max_attempts,
            group_id=group_id,
            sampler_version=version,
        )

    async def __call__(self, episode_id: str, task: TaskRef, version: int, path: str) -> FinishedEpisode:
        await self.run_to_reward(episode_id, task, version, path)
        training = self.rt.state(TrainingProjection).episodes.get(episode_id)
        blobs = training.turn_blobs if training is not None else []
        turns = []
        for blob in blobs:
            doc: dict[str, Any] = msgspec.json.decode(await self.blobs.aget(blob))
            turn, _v = turn_from_training(doc.get("training") or {})
            turns.append(turn)
        reward = self.rt.state(RewardsProjection)[episode_id]
        return FinishedEpisode(
            episode_id=episode_id,
            task_id=task.task_id,
            sampler_version=version,
            reward=reward.reward,
            turns=turns,
            capped=reward.budget_refused in CAPS,
        )

    async def run_to_reward(self, episode_id: str, task: TaskRef, version: int, path: str) -> None:
        rt = self.rt
        if episode_id not in rt.state(RewardsProjection):
            training = rt.state(TrainingProjection).episodes.get(episode_id)
            group_id = training.group_id if training is not None else self.group_prefix
            setup = self._setup(episode_id, task, version, group_id)
            point = None
            if episode_id in rt.state(EpisodesProjection):
                history = self.histories.pop(episode_id, None)
                if history is None:
                    raise RuntimeError(f"episode {episode_id} is in the log but was not read back for resume")
                point = resume_point(history, self.blobs, max_attempts=setup.max_attempts)
            policy = await self.policy_for(episode_id, task.family, version, path)
            outcome = await EpisodeRunner(rt, self.blobs, policy, self.validator, self.gate).run(setup, point)
            if outcome.status == "validated":
                await self._queue_job(setup, outcome)
            await rt.wait_until(lambda: episode_id in rt.state(RewardsProjection))

    async def drop_jobs(self, episode_ids: list[str], reason: str) -> None:
        """The loop dropped these episodes for good: ask the fleet to cancel each of their jobs not yet final.
        Their tasks were told to stop just before, with no await since: a job one of them queued is in the
        queue already, and a cancelled task queues no other."""
        dropped = set(episode_ids)
        queue = self.rt.state(QueueProjection)
        wanted = [
            j.job_id
            for j in queue.jobs.values()
            if j.episode_id in dropped and j.status not in FINAL and j.job_id not in queue.cancels
        ]
        for job_id in sorted(wanted):
            await self.rt.emit(JobCancelRequested(job_id=job_id, reason=reason))
            log.info("outer.job_cancel_requested", job_id=job_id, reason=reason)

    async def _queue_job(self, setup: EpisodeSetup, outcome: EpisodeOutcome) -> None:
        job_id = f"job-{setup.episode_id}"
        if job_id in self.rt.state(QueueProjection).jobs:
            return  # queued before the crash: the dispatcher has it
        if outcome.job is None or not outcome.bundle:
            raise RuntimeError(f"episode {setup.episode_id}: validated but its job.toml or bundle is missing")
        model = outcome.job.prime_rl.model
        await self.rt.emit(
            JobQueued(
                job_id=job_id,
                episode_id=setup.episode_id,
                family=setup.spec.family,
                base_model=model,
                bundle=outcome.bundle,
                time_budget_s=float(setup.spec.bounds.time_budget_s),
                # the longest-first order sorts by it; a kind this run has not finished yet goes by its budget
                estimate_s=duration_estimate(self.rt.state(QueueProjection), setup.spec.family, model),
            )
        )


def _frozen(rt: Runtime, family: str) -> dict[str, float]:
    scores: dict[str, float] = rt.state(BaselinesProjection).get(family, {})
    return dict(scores)
