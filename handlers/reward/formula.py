"""The episode reward: pure functions from an episode's outcome and the reward config to ``RewardComputed``.

``reward = w_validation*validation + w_quality*quality + w_speed*speed`` (live weights 0.35 / 0.60 / 0.05),
except that an episode with no parseable submission at all scores ``no_submission_reward`` (-0.1) overall.

- validation: ``validation_decay ** (attempts - 1)`` for an episode that validated on attempt ``attempts``
  (1.0 first try, then 0.5, 0.25, ... with the default decay 0.5), 0 if it never validated. Geometric decay
  keeps every validated episode above every non-validated one and makes each extra attempt cost the same
  share. (The seed does not state its schedule; its holdout table's worst episode, 0.175 = 0.35 * 0.5, fits
  halving.)
- quality: ``quality_absolute*post + quality_uplift*(post - best_pre)`` (0.25 / 0.75) for a job that
  succeeded; 0 for a job that died, or when no job ran (the validation term stays).
- speed: ``clamp(1 - train_seconds / time_budget_s, 0, 1)`` for a job that succeeded, else 0.

Scores (post, best_pre) are fractions in [0, 1]. -1.0 is only the CSV sentinel for "no post score"
(:func:`post_for_csv`); passing it as a score is an error. Bounds: :func:`reward_bounds`. Every input and the
config go into the event, so :func:`recompute` rebuilds the reward from the event alone. See docs/reward.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from engine.derive import register_deriver
from events import EventBody, RewardComputed

__all__ = [
    "CSV_NO_POST",
    "OUTCOMES",
    "RewardConfig",
    "RewardInputs",
    "compute_reward",
    "config_of",
    "explain",
    "inputs_of",
    "post_for_csv",
    "quality_term",
    "recompute",
    "reward_bounds",
    "speed_term",
    "validation_term",
]

CSV_NO_POST: Final = -1.0  # logging sentinel for "no post score" in CSV exports; never a reward
OUTCOMES: Final = ("scored", "job_failed", "no_job", "not_validated", "no_submission")
JobStatus = Literal["succeeded", "failed", "none"]
_BUDGETS: Final = ("", "episode", "run", "global")


class RewardConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``[reward]`` table of the run config."""

    w_validation: float = 0.35
    w_quality: float = 0.60
    w_speed: float = 0.05
    validation_decay: float = 0.5  # validation on attempt n is decay**(n-1)
    quality_absolute: float = 0.25  # weight of post inside quality
    quality_uplift: float = 0.75  # weight of post - best_pre inside quality
    no_submission_reward: float = -0.1  # the whole reward when no submission ever parsed

    def __post_init__(self) -> None:
        for name in ("w_validation", "w_quality", "w_speed", "quality_absolute", "quality_uplift"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"reward.{name}: must be a finite number >= 0, got {value!r}")
        if not (0 < self.validation_decay <= 1):
            raise ValueError(f"reward.validation_decay: must be in (0, 1], got {self.validation_decay!r}")
        if not (math.isfinite(self.no_submission_reward) and self.no_submission_reward <= 0):
            raise ValueError(
                f"reward.no_submission_reward: must be a finite number <= 0, got {self.no_submission_reward!r}"
            )

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, source: str = "run config") -> RewardConfig:
        """Build from a parsed ``[reward]`` table; errors name ``source`` and the key."""
        known = set(cls.__struct_fields__)
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError(f"{source}: [reward] has unknown key(s) {unknown}; known: {sorted(known)}")
        for key, value in table.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{source}: reward.{key}: expected a number, got {value!r}")
        try:
            return cls(**{k: float(v) for k, v in table.items()})
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


class RewardInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What happened in one finished episode, as far as the reward is concerned."""

    episode_id: str
    parseable: bool  # at least one submission parsed
    attempts: int  # submissions made; when validated, the attempt that validated
    validated: bool
    job_status: JobStatus = "none"
    post: float | None = None  # hidden-eval score after training, in [0, 1]
    best_pre: float | None = None  # frozen score of the best untrained model on the family, in [0, 1]
    train_seconds: float | None = None
    time_budget_s: float | None = None
    job_failure: str = ""
    budget_refused: str = ""  # the budget that ended the episode early, if any
    family: str = ""
    job_id: str = ""
    base_model: str = ""


def _check_score(name: str, value: float | None, *, required: bool) -> None:
    if value is None:
        if required:
            raise ValueError(f"reward input {name}: required for a job that succeeded")
        return
    if value == CSV_NO_POST:
        raise ValueError(f"reward input {name}: -1.0 is the CSV 'no post score' sentinel; pass None instead")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"reward input {name}: must be a score in [0, 1], got {value!r}")


def _check_inputs(x: RewardInputs) -> None:
    if x.attempts < 0:
        raise ValueError(f"reward input attempts: must be >= 0, got {x.attempts}")
    if x.validated and not x.parseable:
        raise ValueError("reward inputs: validated=True but parseable=False (a validated submission parsed)")
    if x.validated and x.attempts < 1:
        raise ValueError("reward inputs: validated=True needs attempts >= 1")
    if x.job_status not in ("succeeded", "failed", "none"):
        raise ValueError(f"reward input job_status: expected succeeded|failed|none, got {x.job_status!r}")
    if x.job_status != "none" and not x.validated:
        raise ValueError(f"reward inputs: job_status={x.job_status!r} but the episode never validated")
    if x.budget_refused not in _BUDGETS:
        raise ValueError(f"reward input budget_refused: expected one of {_BUDGETS}, got {x.budget_refused!r}")
    succeeded = x.job_status == "succeeded"
    _check_score("post", x.post, required=succeeded)
    _check_score("best_pre", x.best_pre, required=succeeded)
    for name in ("train_seconds", "time_budget_s"):
        value = getattr(x, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"reward input {name}: must be a finite number >= 0, got {value!r}")


def validation_term(validated: bool, attempts: int, decay: float) -> float:
    """1.0 on the first attempt, ``decay`` per extra attempt, 0 if never validated."""
    if not validated:
        return 0.0
    return float(decay ** (attempts - 1))


def quality_term(post: float, best_pre: float, config: RewardConfig) -> float:
    """``quality_absolute*post + quality_uplift*(post - best_pre)`` for a job that succeeded."""
    return config.quality_absolute * post + config.quality_uplift * (post - best_pre)


def speed_term(train_seconds: float | None, time_budget_s: float | None) -> float:
    """Share of the time budget left unused, in [0, 1]; 0 when either figure is missing or the budget is 0."""
    if train_seconds is None or not time_budget_s:
        return 0.0
    return min(1.0, max(0.0, 1.0 - train_seconds / time_budget_s))


def _outcome(x: RewardInputs) -> str:
    if not x.parseable:
        return "no_submission"
    if not x.validated:
        return "not_validated"
    if x.job_status == "succeeded":
        return "scored"
    return "job_failed" if x.job_status == "failed" else "no_job"


def compute_reward(inputs: RewardInputs, config: RewardConfig) -> RewardComputed:
    """The reward of one finished episode with every component. Raises ``ValueError`` on inconsistent input."""
    _check_inputs(inputs)
    outcome = _outcome(inputs)
    validation = quality = speed = 0.0
    uplift: float | None = None
    if outcome == "no_submission":
        reward = config.no_submission_reward
    else:
        validation = validation_term(inputs.validated, inputs.attempts, config.validation_decay)
        if outcome == "scored":
            assert inputs.post is not None and inputs.best_pre is not None  # checked above
            uplift = inputs.post - inputs.best_pre
            quality = quality_term(inputs.post, inputs.best_pre, config)
            speed = speed_term(inputs.train_seconds, inputs.time_budget_s)
        reward = config.w_validation * validation + config.w_quality * quality + config.w_speed * speed
    return RewardComputed(
        episode_id=inputs.episode_id,
        reward=reward,
        validation=validation,
        quality=quality,
        speed=speed,
        w_validation=config.w_validation,
        w_quality=config.w_quality,
        w_speed=config.w_speed,
        attempts=inputs.attempts,
        validated=inputs.validated,
        parseable=inputs.parseable,
        job_status=inputs.job_status,
        post=inputs.post,
        best_pre=inputs.best_pre,
        train_seconds=inputs.train_seconds,
        time_budget_s=inputs.time_budget_s,
        outcome=outcome,
        uplift=uplift,
        job_failure=inputs.job_failure,
        budget_refused=inputs.budget_refused,
        validation_decay=config.validation_decay,
        quality_absolute=config.quality_absolute,
        quality_uplift=config.quality_uplift,
        no_submission_reward=config.no_submission_reward,
        family=inputs.family,
        job_id=inputs.job_id,
        base_model=inputs.base_model,
    )


def inputs_of(rc: RewardComputed) -> RewardInputs:
    """The inputs recorded in a ``RewardComputed`` event."""
    return RewardInputs(
        episode_id=rc.episode_id,
        parseable=rc.parseable,
        attempts=rc.attempts,
        validated=rc.validated,
        job_status=rc.job_status,  # type: ignore[arg-type]  # validated by compute_reward
        post=rc.post,
        best_pre=rc.best_pre,
        train_seconds=rc.train_seconds,
        time_budget_s=rc.time_budget_s,
        job_failure=rc.job_failure,
        budget_refused=rc.budget_refused,
        family=rc.family,
        job_id=rc.job_id,
        base_model=rc.base_model,
    )


def config_of(rc: RewardComputed) -> RewardConfig:
    """The reward config recorded in a ``RewardComputed`` event."""
    return RewardConfig(
        w_validation=rc.w_validation,
        w_quality=rc.w_quality,
        w_speed=rc.w_speed,
        validation_decay=rc.validation_decay,
        quality_absolute=rc.quality_absolute,
        quality_uplift=rc.quality_uplift,
        no_submission_reward=rc.no_submission_reward,
    )


def recompute(rc: RewardComputed) -> RewardComputed:
    """Recompute a recorded reward with today's code from its recorded inputs and config (``replay --verify``).

    The result equals ``rc`` exactly when the code still computes what it computed then.
    """
    return compute_reward(inputs_of(rc), config_of(rc))


def _derive(body: EventBody, states: Mapping[str, Any]) -> EventBody:
    """``replay --verify``: the reward today's code computes from the recorded inputs and config."""
    assert isinstance(body, RewardComputed)
    try:
        return recompute(body)
    except ValueError as exc:  # inputs today's code rejects: report as a mismatch rather than stop the replay
        return msgspec.structs.replace(body, outcome=f"invalid inputs: {exc}")


register_deriver(RewardComputed, _derive)


def reward_bounds(config: RewardConfig) -> tuple[float, float]:
    """The least and greatest reward possible under ``config`` (scores in [0, 1]).

    Default weights: [-0.45, 1.0]; the low end is a job that scored post 0 against best_pre 1.
    """
    q_min = -config.quality_uplift  # post 0, best_pre 1
    q_max = config.quality_absolute + config.quality_uplift  # post 1, best_pre 0
    lo = min(config.no_submission_reward, config.w_quality * q_min, 0.0)
    hi = config.w_validation + config.w_quality * max(q_max, 0.0) + config.w_speed
    return lo, hi


def post_for_csv(post: float | None) -> float:
    """The post score as a CSV cell: -1.0 is the sentinel for "no post score" (never a reward)."""
    return CSV_NO_POST if post is None else post


def explain(rc: RewardComputed) -> str:
    """One line saying why the reward is what it is, for reports and the episode summary."""
    why = {
        "no_submission": f"no parseable submission: reward {rc.no_submission_reward:+.3f} overall",
        "not_validated": f"never validated in {rc.attempts} attempt(s): validation 0, no job",
        "no_job": f"validated on attempt {rc.attempts} but no job ran: quality 0",
        "job_failed": f"validated on attempt {rc.attempts}; job failed ({rc.job_failure or 'unclassified'}): "
        "quality 0, validation kept",
        "scored": f"validated on attempt {rc.attempts}; post {rc.post} vs best_pre {rc.best_pre} "
        f"(uplift {rc.uplift:+.3f})"
        if rc.uplift is not None
        else "scored",
    }.get(rc.outcome, rc.outcome)
    if rc.budget_refused:
        why += f"; ended by the {rc.budget_refused} budget"
    if rc.outcome == "no_submission":
        return f"reward {rc.reward:+.4f}: {why}"
    return (
        f"reward {rc.reward:+.4f} = {rc.w_validation}*{rc.validation:.4f} (validation) + "
        f"{rc.w_quality}*{rc.quality:.4f} (quality) + {rc.w_speed}*{rc.speed:.4f} (speed): {why}"
    )
