"""Drawing a batch of tasks: ``tasks_per_batch`` tasks from the training families, re-queued tasks first.

``triage`` (the held-out family) is refused outright, so no path can train on the holdout. The draw is
deterministic in (seed, step): a resumed run draws the same tasks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import msgspec

from families import HELD_OUT_FAMILIES

__all__ = ["TaskRef", "draw_tasks"]


class TaskRef(msgspec.Struct, frozen=True, kw_only=True):
    family: str
    index: int  # which seeded task of the family's training split

    @property
    def task_id(self) -> str:
        return f"{self.family}:{self.index}"

    @classmethod
    def parse(cls, task_id: str) -> TaskRef:
        """The inverse of :attr:`task_id` (``"calc_chain:17"``); a malformed id is an error naming it."""
        family, sep, index = task_id.rpartition(":")
        if not sep or not family or not (index.isascii() and index.isdigit()):
            raise ValueError(f"task id {task_id!r}: expected FAMILY:INDEX")
        return cls(family=family, index=int(index))


def draw_tasks(
    families: Sequence[str],
    n: int,
    *,
    seed: int,
    step: int,
    requeued: Sequence[TaskRef] = (),
    pool_size: int = 10_000,
) -> list[TaskRef]:
    """``n`` tasks for batch ``step``: the re-queued ones first (oldest first), then fresh draws spread
    round-robin over ``families`` so every family appears in a batch of >= len(families) tasks."""
    if n < 1:
        raise ValueError("draw_tasks: n must be >= 1")
    if not families:
        raise ValueError("draw_tasks: no families")
    for fam in [*families, *(t.family for t in requeued)]:
        if fam in HELD_OUT_FAMILIES:
            raise ValueError(f"draw_tasks: family {fam!r} is held out and never trained on")
    out = list(requeued[:n])
    rng = random.Random(f"{seed}:batch:{step}")
    order = list(families)
    rng.shuffle(order)
    i = 0
    while len(out) < n:
        out.append(TaskRef(family=order[i % len(order)], index=rng.randrange(pool_size)))
        i += 1
    return out
