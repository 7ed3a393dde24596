"""The domain's projections, as the CLI and replay install them."""

from __future__ import annotations

from typing import Any

from engine.projection import Projection

from .run_summary import RunSummaryProjection

__all__ = ["default_projections"]


def default_projections() -> list[Projection[Any]]:
    """A fresh instance of every domain projection (the engine adds its own ``effects``)."""
    return [RunSummaryProjection()]
