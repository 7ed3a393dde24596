"""The domain's projections, as the CLI and replay install them."""

from __future__ import annotations

from typing import Any

from engine.projection import Projection
from handlers.budget.rules import BudgetProjection
from handlers.episode.projection import EpisodesProjection
from handlers.fleet.projection import FleetProjection
from handlers.fleet.queue import QueueProjection
from handlers.reward.baseline_projection import BaselinesProjection
from handlers.reward.projection import RewardsProjection
from handlers.run.summary import RunSummaryProjection
from handlers.training.projection import TrainingProjection

__all__ = ["default_projections"]


def default_projections() -> list[Projection[Any]]:
    """A fresh instance of every domain projection (the engine adds its own ``effects``)."""
    return [
        RunSummaryProjection(),
        EpisodesProjection(),
        BudgetProjection(),
        RewardsProjection(),
        BaselinesProjection(),
        QueueProjection(),
        FleetProjection(),
        TrainingProjection(),
    ]
