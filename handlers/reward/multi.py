"""The reward inputs of a multi-job episode (docs/reward.md, "Multi-job episodes").

The formula is today's (:mod:`handlers.reward.formula`); only its inputs are read differently:

- the episode is *validated* when it ended with ``finish(final_job_id)`` naming one of its own jobs, and then
  ``attempts`` = 1 + its rejected submissions (each rejection halves the validation term, as a retry does today);
- quality is the **final** job's: its hidden post-score against the family's ``best_pre`` (a final job that
  failed scores quality 0, the validation term stays);
- speed counts **every** job: ``train_seconds`` = the sum over the episode's jobs (a failed job counts its whole
  time budget) against one job's ``time_budget_s``, so a second job is paid for in the speed term;
- an episode that ends without a valid final job (turns ran out, a budget or the policy ended it) gets today's
  penalty: validation 0 and no quality (reward 0), or ``no_submission_reward`` when nothing ever parsed.

The reward is due once the episode has finished and, if it named a final job, every one of its jobs has an
outcome (jobs still running when ``finish`` was called count towards speed, so they are waited for).
"""

from __future__ import annotations

from typing import Any

from handlers.episode.job_tools import DONE
from handlers.episode.projection import EpisodeState
from handlers.reward.formula import RewardInputs

__all__ = ["is_multi", "multi_inputs"]


def is_multi(ep: EpisodeState) -> bool:
    return ep.max_jobs > 1


def multi_inputs(ep: EpisodeState, *, best: float | None) -> RewardInputs | None:
    """The reward inputs, or None while the reward is not due yet (episode running, or jobs still out)."""
    if ep.status == "running":
        return None
    base: dict[str, Any] = {
        "episode_id": ep.episode_id,
        "parseable": ep.parseable,
        "family": ep.family,
        "budget_refused": ep.reason.split(":", 1)[0] if ep.status == "budget_refused" else "",
    }
    final = ep.jobs.get(ep.final_job) if ep.final_job else None
    if final is None:
        return RewardInputs(**base, attempts=ep.attempts, validated=False)
    if any(j.status not in DONE for j in ep.jobs.values()):
        return None
    seconds = sum(j.train_seconds if j.status == "succeeded" else j.reserve_s for j in ep.jobs.values())
    common: dict[str, Any] = {
        **base,
        "attempts": ep.rejected + 1,
        "validated": True,
        "parseable": True,
        "job_id": final.job_id,
        "base_model": final.base_model,
        "time_budget_s": final.reserve_s or None,
    }
    if final.status == "succeeded":
        return RewardInputs(
            **common,
            job_status="succeeded",
            post=final.post,
            best_pre=best,
            train_seconds=seconds,
        )
    return RewardInputs(**common, job_status="failed", job_failure=final.failure)
