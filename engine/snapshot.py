"""Atomic snapshots ``{seq, state}``: temp file -> fsync -> rename -> fsync directory.

State and position change in one atomic step, so a snapshot can never claim a seq its state does not
reflect. Loading = newest snapshot, then replay only the events after its seq. A snapshot is an
optimisation: deleting it never loses anything, the log stays the truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .atomic import write_atomic
from .projection import Projection

__all__ = ["Snapshot", "load_snapshot", "write_snapshot"]

SNAPSHOT_NAME = "snapshot.json"


class Snapshot(msgspec.Struct, frozen=True):
    seq: int  # the last seq folded into ``states``; -1 for none
    states: dict[str, msgspec.Raw]
    state_hash: str = ""


def write_snapshot(directory: Path | str, seq: int, encoded: Mapping[str, bytes], state_hash: str = "") -> Path:
    """Write ``{seq, states}`` atomically; ``encoded`` maps projection name -> its encoded state."""
    d = Path(directory)
    raw = {name: msgspec.Raw(data) for name, data in encoded.items()}
    data = msgspec.json.encode(Snapshot(seq, raw, state_hash))
    return write_atomic(d / SNAPSHOT_NAME, data)


def load_snapshot(directory: Path | str, projections: Sequence[Projection[Any]]) -> tuple[int, dict[str, Any]] | None:
    """The snapshot's seq and decoded states, or None when there is no usable snapshot.

    A snapshot that lacks a projection (one added since it was written) is unusable: replay from zero.
    """
    path = Path(directory) / SNAPSHOT_NAME
    if not path.exists():
        return None
    snap = msgspec.json.decode(path.read_bytes(), type=Snapshot)
    if any(p.name not in snap.states for p in projections):
        return None
    return snap.seq, {p.name: p.decode_state(bytes(snap.states[p.name])) for p in projections}
