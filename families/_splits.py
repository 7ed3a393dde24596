"""Seed spaces and split disjointness.

Every task is drawn from a ``random.Random`` seeded by a hash of (family, split, seed), so the same
(family, split, seed) always gives the same task, byte for byte, on every machine and Python version.

Splits: ``train`` (unlimited seeds), ``dev`` (the handful shown to the trainer agent, seeds ``0..DEV_SIZE-1``,
and the *dev eval* a multi-job episode's ``job_result`` scores, seeds ``DEV_EVAL_START..+DEV_EVAL_SIZE``) and
``hidden`` (the 200-task eval set). The hidden split's seed also mixes in an HMAC of (family, seed) under the
installation key (:mod:`._key`), so the public seed range and the generator code alone cannot rebuild it;
train and dev draws do not depend on the key (except through the rare collision redraw below).

Disjointness is by construction, not by luck: a ``train`` or ``dev`` draw whose
fingerprint (prompt and answer) equals a hidden task's is rejected and redrawn with the next sub-seed, so
no training or dev task can ever equal a hidden one, over the whole seed space.

In a process sealed from the key (:func:`._key.key_sealed`: the CPU trainer's training child) the hidden
set does not exist, so train and dev draws there take the first draw without the collision check: the
trusted reference env still runs there, and a chance collision (measured: 12 in 20 000 multi_hop train
seeds, 2 for string_pipeline and dispatch, none for calc_chain, ledger, triage) is no more than any env
that cannot see the hidden set would produce. Nothing in that process can tell which draws collide.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import msgspec

from ._base import Task
from ._key import current_key, key_sealed

__all__ = [
    "DEV_EVAL_SIZE",
    "DEV_EVAL_START",
    "DEV_SIZE",
    "HIDDEN_SIZE",
    "SPLITS",
    "draw_disjoint",
    "fingerprint",
    "split_rng",
]

SPLITS = ("train", "dev", "hidden")
HIDDEN_SIZE = 200  # hidden eval tasks: split "hidden", seeds 0..199
MAX_REDRAWS = 1000
DEV_SIZE = 5  # dev examples shown to the trainer agent: split "dev", seeds 0..4
# The dev eval of a multi-job episode (job_result's score): split "dev", seeds 10_000..10_063. A range of its own,
# far from the dev examples, so the agent never holds the answers it is scored on; split "dev" is hashed apart
# from "train", and every draw is checked against the hidden set like any dev draw.
DEV_EVAL_START = 10_000
DEV_EVAL_SIZE = 64


def split_rng(family: str, split: str, seed: int, attempt: int = 0) -> random.Random:
    """A generator seeded by a stable hash (never Python's salted ``hash``); keyed for the hidden split."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    material = f"{family}|{split}|{seed}|{attempt}"
    if split == "hidden":
        material += "|" + current_key().hidden_mix(family, seed)
    digest = hashlib.sha256(material.encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


_ENC = msgspec.json.Encoder(order="deterministic")


def fingerprint(task: Task) -> str:
    """What makes two tasks 'the same task' to a learner: what it is asked and what it must answer.

    The world is left out on purpose: two tasks with the same prompt and answer but different hidden
    state (say, an untouched account's balance) would still let a model memorise a hidden answer, so they
    count as a collision. Any two tasks equal in (prompt, world, answer) are of course equal here too.
    """
    return hashlib.sha256(_ENC.encode([task.prompt, task.answer])).hexdigest()


def draw_disjoint(
    draw: Callable[[random.Random], Task],
    family: str,
    split: str,
    seed: int,
    hidden: Callable[[], frozenset[str]],
) -> Task:
    """Draw a task for ``split``; for train/dev, redraw while it collides with a hidden task."""
    if split != "hidden" and key_sealed():
        return draw(split_rng(family, split, seed, 0))  # no hidden set here (see the module docstring)
    for attempt in range(MAX_REDRAWS):
        task = draw(split_rng(family, split, seed, attempt))
        if split == "hidden" or fingerprint(task) not in hidden():
            return task
    # Only a degenerate generator (a tiny task space) gets here; fail loudly rather than loop.
    raise RuntimeError(f"{family}/{split}/{seed}: {MAX_REDRAWS} draws in a row collided with hidden tasks")
