"""The premise both warm-sibling isolation tests rest on (tests/adapters/probe/test_warm.py and
tests/adapters/cpu_trainer/test_warm.py): the two children really ran at the same time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["overlapped"]


def overlapped(found: Mapping[str, Mapping[str, Any]]) -> bool:
    """Each child looked while the other had marked and was still running: otherwise "sees nothing" proves
    nothing. ``found``: each child's time stamps (``t_marked``, ``t_checked``, ``t_done``) by name."""
    alpha, beta = found["alpha"], found["beta"]
    return all(
        theirs["t_marked"] < mine["t_checked"] < theirs["t_done"] for mine, theirs in ((alpha, beta), (beta, alpha))
    )
