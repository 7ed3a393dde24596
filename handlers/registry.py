"""The domain's projections, as the CLI and replay install them."""

from __future__ import annotations

from typing import Any

from engine.projection import Projection

from .baseline_projection import BaselinesProjection
from .budget import BudgetProjection
from .episode.projection import EpisodesProjection
from .fleet import FleetProjection
from .queue import QueueProjection
from .reward_projection import RewardsProjection
from .run_summary import RunSummaryProjection
from .training.projection import TrainingProjection

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
