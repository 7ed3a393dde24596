"""The fixed task sets of a family: the hidden eval set and the dev examples, cached per family name.

The hidden set is split ``hidden``, seeds ``0..HIDDEN_SIZE-1`` at the family's default difficulty mix,
under the installation key (:mod:`._key`). It is only ever built in process (for scoring); nothing here
writes it anywhere. The cache is keyed by the family's name and the key's fingerprint, so a subclass (a
test double) shares its parent's hidden set and a changed key never serves a stale set.
"""

from __future__ import annotations

from ._base import Family, Task
from ._key import key_fingerprint
from ._splits import DEV_EVAL_SIZE, DEV_EVAL_START, DEV_SIZE, HIDDEN_SIZE, fingerprint

__all__ = ["dev_eval_tasks", "dev_tasks", "hidden_fingerprints", "hidden_tasks"]

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


def dev_eval_tasks(family: Family, limit: int | None = None) -> tuple[Task, ...]:
    """The dev eval a multi-job episode's jobs are scored on for the agent: split ``dev``, seeds
    ``DEV_EVAL_START..DEV_EVAL_START+DEV_EVAL_SIZE-1`` (the first ``limit`` of them if given).

    Built like every dev draw (redrawn on a collision with the hidden set where the key is at hand; the first
    draw in a sealed process), so scoring it needs neither the hidden set nor the key there."""
    n = DEV_EVAL_SIZE if limit is None else max(0, min(limit, DEV_EVAL_SIZE))
    return tuple(family.generate("dev", DEV_EVAL_START + i) for i in range(n))
