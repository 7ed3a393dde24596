"""GRPO advantages: each episode's reward minus its group's mean (no std normalisation, as the cookbook)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["group_advantages"]


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """``r_i - mean(r)`` for one group; an empty group is an error (it has no baseline)."""
    if not rewards:
        raise ValueError("group_advantages: empty group")
    mean = sum(rewards) / len(rewards)
    return [r - mean for r in rewards]
