"""Injected sources of time, ids and randomness.

Nothing in a projection reads these: their values enter the system only inside events, so a replay
sees the recorded values. Live code gets the system clock and random ids; tests get fixed ones.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from typing import Protocol

__all__ = ["Clock", "CountingIds", "IdSource", "ManualClock", "RandomIds", "SystemClock", "rng_for"]


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock for tests: starts at ``start`` and moves only when told (or by ``step`` per read)."""

    def __init__(self, start: float = 1_764_460_800.0, step: float = 0.0) -> None:
        self.t = start
        self.step = step

    def now(self) -> float:
        t = self.t
        self.t += self.step
        return t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class IdSource(Protocol):
    def new(self, prefix: str) -> str: ...


class RandomIds:
    def new(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"


class CountingIds:
    """Deterministic ids: ``<prefix>-<n>`` per prefix. For tests and simulations."""

    def __init__(self) -> None:
        self._n: dict[str, int] = {}

    def new(self, prefix: str) -> str:
        n = self._n.get(prefix, 0)
        self._n[prefix] = n + 1
        return f"{prefix}-{n}"


def rng_for(seed: int, key: str) -> random.Random:
    """A generator for one decision, seeded by (run seed, key) through a stable hash (not Python's salted one)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))
