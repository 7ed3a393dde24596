"""The fixed task sets of a family: the hidden eval set and the dev examples, cached per family name.

The hidden set is split ``hidden``, seeds ``0..HIDDEN_SIZE-1`` at the family's default difficulty mix,
under the installation key (:mod:`._key`). It is only ever built in process (for scoring); nothing here
writes it anywhere. The cache is keyed by the family's name and the key's fingerprint, so a subclass (a
test double) shares its parent's hidden set and a changed key never serves a stale set.
"""

from __future__ import annotations

from ._base import Family, Task
from ._key import key_fingerprint
from ._splits import DEV_SIZE, HIDDEN_SIZE, fingerprint

__all__ = ["dev_tasks", "hidden_fingerprints", "hidden_tasks"]

_HIDDEN: dict[tuple[str, str], tuple[Task, ...]] = {}
_HIDDEN_FPS: dict[tuple[str, str], frozenset[str]] = {}


def hidden_tasks(family: Family) -> tuple[Task, ...]:
    """The family's 200 hidden eval tasks (built once per process)."""
    cache_key = (family.name, key_fingerprint())
    tasks = _HIDDEN.get(cache_key)
    if tasks is None:
        tasks = _HIDDEN[cache_key] = tuple(family.generate("hidden", s) for s in range(HIDDEN_SIZE))
    return tasks


def hidden_fingerprints(family: Family) -> frozenset[str]:
    """Fingerprints of the hidden tasks: what every train and dev draw is checked against."""
    cache_key = (family.name, key_fingerprint())
    fps = _HIDDEN_FPS.get(cache_key)
    if fps is None:
        fps = _HIDDEN_FPS[cache_key] = frozenset(fingerprint(t) for t in hidden_tasks(family))
    return fps


def dev_tasks(family: Family) -> tuple[Task, ...]:
    """The dev examples shown to the trainer agent: split ``dev``, seeds ``0..DEV_SIZE-1``."""
    return tuple(family.generate("dev", seed) for seed in range(DEV_SIZE))
