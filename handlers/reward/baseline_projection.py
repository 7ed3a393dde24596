"""Frozen baselines as the run saw them: ``{family: {model: score}}`` from ``baseline.frozen`` events.

A run copies the frozen baselines it uses into its own log at start, so its rewards can be recomputed from
the log alone (``replay --verify``) even if the baselines file changes later.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.projection import Projection, handles
from events import BaselineFrozen

__all__ = ["BaselinesProjection", "best_pre"]


class BaselinesProjection(Projection[dict[str, dict[str, float]]]):
    name = "baselines"
    state_type = dict[str, dict[str, float]]

    def initial(self) -> dict[str, dict[str, float]]:
        return {}

    @handles(BaselineFrozen)
    def _frozen(self, s: dict[str, dict[str, float]], e: BaselineFrozen) -> dict[str, dict[str, float]]:
        s.setdefault(e.family, {})[e.model] = e.score
        return s


def best_pre(state: Mapping[str, Mapping[str, float]], family: str) -> float | None:
    """The best untrained model's frozen score on ``family``, or None when nothing was frozen for it."""
    scores = state.get(family)
    return max(scores.values()) if scores else None
