"""The fixed task sets of a family: the hidden eval set and the dev examples, cached per family name.

The hidden set is split ``hidden``, seeds ``0..HIDDEN_SIZE-1`` at the family's default difficulty mix.
It is only ever built in process (for scoring); nothing here writes it anywhere. The cache is keyed by
the family's name, so a subclass (a test double) shares its parent's hidden set.
"""

from __future__ import annotations

from ._base import Family, Task
from ._splits import DEV_SIZE, HIDDEN_SIZE, fingerprint

__all__ = ["dev_tasks", "hidden_fingerprints", "hidden_tasks"]

_HIDDEN: dict[str, tuple[Task, ...]] = {}
_HIDDEN_FPS: dict[str, frozenset[str]] = {}


def hidden_tasks(family: Family) -> tuple[Task, ...]:
    """The family's 200 hidden eval tasks (built once per process)."""
    tasks = _HIDDEN.get(family.name)
    if tasks is None:
        tasks = _HIDDEN[family.name] = tuple(family.generate("hidden", s) for s in range(HIDDEN_SIZE))
    return tasks


def hidden_fingerprints(family: Family) -> frozenset[str]:
    """Fingerprints of the hidden tasks: what every train and dev draw is checked against."""
    fps = _HIDDEN_FPS.get(family.name)
    if fps is None:
        fps = _HIDDEN_FPS[family.name] = frozenset(fingerprint(t) for t in hidden_tasks(family))
    return fps


def dev_tasks(family: Family) -> tuple[Task, ...]:
    """The dev examples shown to the trainer agent: split ``dev``, seeds ``0..DEV_SIZE-1``."""
    return tuple(family.generate("dev", seed) for seed in range(DEV_SIZE))
