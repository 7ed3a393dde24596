"""The end-of-run summary of ``ait train`` / ``ait resume``, read from the run's projections only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from handlers.budget.rules import BudgetProjection
from handlers.fleet.queue import CANCELLED, QueueProjection
from handlers.reward.projection import RewardsProjection
from handlers.training import TrainingState
from handlers.training.projection import TrainingProjection

__all__ = ["steps_done", "summary_lines"]


def steps_done(control: bool) -> str:
    """What became of a finished run's learner steps: a no-learning control computes them and applies none."""
    return "computed, none applied (the no-learning control)" if control else "applied"


def summary_lines(rt: Any, ran_on: Mapping[str, str], *, control: bool = False) -> list[str]:
    """``control``: the run is a no-learning control (``[backend] learn = false``): its steps were computed and
    recorded like any other, but no update reached the weights, so the summary must not call them applied."""
    training: TrainingState = rt.state(TrainingProjection)
    rewards = rt.state(RewardsProjection)
    queue = rt.state(QueueProjection)
    budget = rt.state(BudgetProjection)
    done = steps_done(control)
    lines = [f"run {rt.run_id}: {training.step} learner step(s) {done}, sampler v{training.sampler_version}"]
    for key in sorted(training.steps, key=int):
        rec = training.steps[key]
        got = [rewards[e].reward for e in rec.episode_ids if e in rewards]
        mean = sum(got) / len(got) if got else float("nan")
        state = ("computed, not applied" if control else "applied") if rec.applied else "collected, not applied"
        lines.append(
            f"  step {rec.step}: {len(rec.episode_ids)} episodes, mean reward {mean:+.3f}, "
            f"{rec.n_datums} datums, {rec.n_tokens} trained tokens ({state})"
        )
    groups = training.groups.values()
    trained = sum(1 for g in groups if g.status == "trained")
    discarded = sum(1 for g in groups if g.status == "discarded")
    open_ = sum(1 for g in groups if g.status == "running")
    lines.append(
        f"groups: {trained} trained, {discarded} discarded as stale ({len(training.requeued)} task(s) re-queued), "
        f"{open_} open (continued by a later `ait resume --max-steps N`)"
    )
    if training.short_groups:
        dropped = sum(len(g.dropped) for g in groups)
        lines.append(
            f"short: {training.short_groups} group(s) trained without their stragglers at their last fresh step "
            f"({dropped} straggler episode(s) cancelled)"
        )
    counts = queue.counts
    cancelled = sum(1 for j in queue.jobs.values() if j.status == "failed" and j.reason == CANCELLED)
    failed = f"{counts.get('failed', 0)} failed" + (f" ({cancelled} cancelled: episode dropped)" if cancelled else "")
    lines.append(
        f"inner jobs: {counts.get('succeeded', 0)} succeeded, {failed}, "
        f"{sum(counts.get(k, 0) for k in ('queued', 'requeued', 'assigned', 'running'))} unfinished "
        f"(final drain: {ran_on.get('final drain', '-')})"
    )
    kinds = ", ".join(f"{k} ${v / 1_000_000:.4f}" for k, v in sorted(budget.settled_by_kind.items()))
    lines.append(f"spend: ${budget.settled / 1_000_000:.4f} settled by this run ({kinds or 'nothing yet'})")
    if training.capped_episodes:
        lines.append(f"capped: {training.capped_episodes} episode(s) ended by the run or global cap, left out of steps")
    last = training.steps.get(str(training.step - 1))
    if last is not None:
        lines.append(f"checkpoint: state {last.state_path or '(none this step)'}, sampler {last.sampler_path}")
    lines.append("ran on: " + ", ".join(f"{k}={v}" for k, v in ran_on.items() if k != "final drain"))
    lines.append(f"log: {rt.log.path}")
    return lines
