"""The projections ``ait watch`` and ``ait report`` fold beyond the domain's, for a run's runtime to snapshot.

A run started with these as its runtime's ``views`` (``engine.runtime.Runtime(views=...)``, as ``ait train``
does) has snapshots that hold every state the dashboard and the report fold: they then start from the newest
snapshot and read only the log after it (:class:`views.watch.folder.RunFolder`). The views stay out of the
run's state hash.
"""

from __future__ import annotations

from typing import Any

from engine.projection import Projection
from handlers.registry import default_projections
from views.report.accounts import AccountsProjection
from views.report.curves import JobCurvesProjection
from views.watch.folder import watch_projections

__all__ = ["snapshot_views"]


def snapshot_views() -> list[Projection[Any]]:
    """Fresh instances of the watch's and the report's own projections (not the domain's)."""
    domain = {p.name for p in default_projections()}
    wanted = watch_projections([AccountsProjection(), JobCurvesProjection()])
    return [p for p in wanted if p.name not in domain]
