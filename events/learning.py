"""Outer-loop learning events: rewards, frozen baselines, batches and LoRA steps."""

from __future__ import annotations

from ._base import EventBody, event

__all__ = [
    "BaselineFrozen",
    "BatchCollected",
    "BatchStarted",
    "EpisodeStaleDiscarded",
    "GroupClosedShort",
    "GroupStarted",
    "LoRAStepApplied",
    "RewardComputed",
    "SamplerPublished",
]


@event("reward.computed")
class RewardComputed(EventBody, frozen=True, kw_only=True):
    """The episode reward with every component, every input and the config used, so that a report can
    decompose it and ``replay --verify`` can recompute it (:func:`handlers.reward.formula.recompute`).

    ``outcome`` says why the reward is what it is: ``scored`` | ``job_failed`` | ``no_job`` |
    ``not_validated`` | ``no_submission``. ``budget_refused`` names the budget that ended the episode, if any.
    ``post`` is ``None`` when there is no post score (the CSV sentinel -1.0 never appears here).
    """

    episode_id: str
    reward: float
    validation: float
    quality: float
    speed: float
    w_validation: float
    w_quality: float
    w_speed: float
    attempts: int
    validated: bool
    parseable: bool
    job_status: str  # "succeeded" | "failed" | "none"
    post: float | None = None
    best_pre: float | None = None
    train_seconds: float | None = None
    time_budget_s: float | None = None
    outcome: str = ""
    uplift: float | None = None
    job_failure: str = ""  # the classified reason of a failed job
    budget_refused: str = ""  # "" | "episode" | "run" | "global"
    validation_decay: float = 0.5
    quality_absolute: float = 0.25
    quality_uplift: float = 0.75
    no_submission_reward: float = -0.1
    family: str = ""
    job_id: str = ""
    base_model: str = ""


@event("baseline.frozen")
class BaselineFrozen(EventBody, frozen=True, kw_only=True):
    family: str
    model: str
    score: float
    n: int
    key_fingerprint: str = ""


@event("batch.started")
class BatchStarted(EventBody, frozen=True, kw_only=True):
    step: int
    task_ids: list[str]
    group_size: int
    sampler_version: int = 0  # the sampler the batch's episodes start on


@event("group.started")
class GroupStarted(EventBody, frozen=True, kw_only=True):
    """The outer loop starts one GRPO group: ``episode_ids`` (allocated here, so ids come from the log) run
    ``task_id`` on sampler ``sampler_version`` (weights at ``sampler_path``; "" is the base model).

    Emitted before any of its episodes starts: a resumed run re-launches every group that has neither trained
    nor been discarded, with these very ids and this sampler, and the next free episode id is past them."""

    group_id: str
    task_id: str
    episode_ids: list[str]
    sampler_version: int
    sampler_path: str = ""


@event("group.closed_short")
class GroupClosedShort(EventBody, frozen=True, kw_only=True):
    """A group still running at its last fresh step ``step`` (``step - sampler_version`` = the staleness bound)
    trains without its stragglers: ``episode_ids`` (finished, at least ``[outer] min_group_fraction`` of the
    group) are the group from now on and its GRPO baseline is their mean; ``dropped_episode_ids`` are cancelled
    and count as discarded (they are never trained on or run again).

    Emitted before the step's ``batch.collected``; a resumed run re-launches only ``episode_ids``."""

    group_id: str
    step: int
    episode_ids: list[str]
    dropped_episode_ids: list[str]
    task_id: str = ""
    sampler_version: int = 0


@event("batch.collected")
class BatchCollected(EventBody, frozen=True, kw_only=True):
    """The episodes (whole groups) that the learner step ``step`` trains on, and how off-policy they are."""

    step: int
    episode_ids: list[str]
    task_ids: list[str] = []
    staleness_max: int = 0  # max over episodes of step - sampler_version
    staleness_mean: float = 0.0
    # Episodes of these groups ended by the run or global budget cap: their reward says nothing about the
    # policy (docs/reward.md), so they are left out of the step (and of their group's GRPO baseline).
    capped_episode_ids: list[str] = []


@event("episode.stale_discarded")
class EpisodeStaleDiscarded(EventBody, frozen=True, kw_only=True):
    """An episode sampled with ``sampler_version`` could not train at ``step`` (too stale); its task is
    re-queued (``requeued``) so the group is run again on a fresher sampler."""

    episode_id: str
    sampler_version: int
    step: int
    task_id: str = ""
    max_steps_off_policy: int = 2
    requeued: bool = True


@event("lora.step_applied")
class LoRAStepApplied(EventBody, frozen=True, kw_only=True):
    """One optimizer step on the agent's LoRA: loss metrics from the learner and the checkpoint paths
    (``state_path`` resumes training with optimizer state; ``sampler_path`` serves the new weights)."""

    step: int
    metrics: dict[str, float] = {}
    state_path: str = ""
    sampler_path: str = ""
    loss_fn: str = ""
    learning_rate: float = 0.0
    n_datums: int = 0
    n_episodes: int = 0
    n_tokens: int = 0  # trained (sampled) tokens


@event("sampler.published")
class SamplerPublished(EventBody, frozen=True, kw_only=True):
    """Sampler weights ``path`` are now version ``sampler_version``; episodes started from now on use them."""

    sampler_version: int
    path: str
    step: int = 0
