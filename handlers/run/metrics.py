"""Step metrics for an external tracker (the W&B sink): the log, turned into ``(step, {name: value})`` rows.

:class:`MetricsMirror` is a pure fold fed one record at a time, live (a reactor) or over a finished log, and
gives the same rows either way:

- at ``batch.collected`` (step s): ``reward/mean`` and its weighted parts ``reward/validation``,
  ``reward/quality``, ``reward/speed``, ``reward/penalty``; ``episodes/count``, ``episodes/validated_rate``;
  ``jobs/success_rate`` (of the batch's jobs that ended); ``models/share/<model>`` (of its jobs); and the
  run's cumulative spend ``cost/total_usd`` and ``cost/<kind>_usd``;
- at ``lora.step_applied`` (step s): ``train/<metric>`` for every metric the optimizer step recorded.
"""

from __future__ import annotations

from events import BatchCollected, CostSettled, LoRAStepApplied, Recorded, RewardComputed
from handlers.reward.projection import breakdown

__all__ = ["MetricsMirror", "StepRow"]

StepRow = tuple[int, dict[str, float]]


class MetricsMirror:
    def __init__(self) -> None:
        self.rewards: dict[str, RewardComputed] = {}
        self.spend: dict[str, float] = {}

    def observe(self, rec: Recorded) -> list[StepRow]:
        e = rec.event
        if isinstance(e, RewardComputed):
            self.rewards[e.episode_id] = e
        elif isinstance(e, CostSettled):
            self.spend[e.kind] = self.spend.get(e.kind, 0.0) + e.usd
        elif isinstance(e, BatchCollected):
            return [(e.step, self._step(e))]
        elif isinstance(e, LoRAStepApplied) and e.metrics:
            return [(e.step, {f"train/{k}": float(v) for k, v in sorted(e.metrics.items())})]
        return []

    def _step(self, e: BatchCollected) -> dict[str, float]:
        rs = [self.rewards[x] for x in e.episode_ids if x in self.rewards]
        out: dict[str, float] = {"episodes/count": float(len(rs))}
        if rs:
            bd = breakdown(rs)
            for name in ("reward", "validation", "quality", "speed", "penalty"):
                key = "reward/mean" if name == "reward" else f"reward/{name}"
                out[key] = getattr(bd, name)
            out["episodes/validated_rate"] = sum(r.validated for r in rs) / len(rs)
            ended = [r for r in rs if r.job_status in ("succeeded", "failed")]
            if ended:
                out["jobs/success_rate"] = sum(r.job_status == "succeeded" for r in ended) / len(ended)
            jobs = [r for r in rs if r.job_id]
            for model in sorted({r.base_model for r in jobs if r.base_model}):
                out[f"models/share/{model}"] = sum(r.base_model == model for r in jobs) / len(jobs)
        out["cost/total_usd"] = sum(self.spend.values())
        for kind, usd in sorted(self.spend.items()):
            out[f"cost/{kind}_usd"] = usd
        return out
