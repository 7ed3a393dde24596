"""Atomic snapshots ``{seq, state}``: temp file -> fsync -> rename -> fsync directory.

State and position change in one atomic step, so a snapshot can never claim a seq its state does not
reflect. Loading = newest snapshot, then replay only the events after its seq. A snapshot is an
optimisation: deleting it never loses anything, the log stays the truth.

A snapshot that cannot be read into the current projections' states (written by a version whose state types
differ, or damaged) is ignored with a warning naming the file and why: the whole log is folded instead.

A snapshot also anchors the log: the byte offset just past its seq's line, and that line's crc. Opening a run
then reads and checks only the log after the offset (``engine.log.read_log(start=...)``), once the line before
it is found to be that very record; otherwise (a log cut or regrown since) the whole log is read as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from .atomic import write_atomic
from .lazylog import lazy_logger
from .projection import Projection

__all__ = ["Snapshot", "load_anchored", "load_snapshot", "snapshot_anchor", "write_snapshot"]

SNAPSHOT_NAME = "snapshot.json"

log = lazy_logger(__name__)
_T = TypeVar("_T")


class Snapshot(msgspec.Struct, frozen=True):
    seq: int  # the last seq folded into ``states``; -1 for none
    states: dict[str, msgspec.Raw]
    state_hash: str = ""
    offset: int = -1  # the log's byte length through ``seq``'s line (-1: not recorded)
    last_crc: str = ""  # the crc field of ``seq``'s line


class _Anchor(msgspec.Struct):
    seq: int
    offset: int = -1
    last_crc: str = ""


def write_snapshot(
    directory: Path | str,
    seq: int,
    encoded: Mapping[str, bytes],
    state_hash: str = "",
    *,
    offset: int = -1,
    last_crc: str = "",
) -> Path:
    """Write ``{seq, states}`` atomically; ``encoded`` maps projection name -> its encoded state."""
    d = Path(directory)
    raw = {name: msgspec.Raw(data) for name, data in encoded.items()}
    data = msgspec.json.encode(Snapshot(seq, raw, state_hash, offset, last_crc))
    return write_atomic(d / SNAPSHOT_NAME, data)


def load_snapshot(directory: Path | str, projections: Sequence[Projection[Any]]) -> tuple[int, dict[str, Any]] | None:
    """The snapshot's seq and decoded states, or None when there is no usable snapshot.

    A snapshot that lacks a projection (one added since it was written) is unusable: replay from zero.
    """
    path = Path(directory) / SNAPSHOT_NAME
    if not path.exists():
        return None
    snap = _decode(path, path.read_bytes(), Snapshot)
    if snap is None or any(p.name not in snap.states for p in projections):
        return None
    states = _states(path, snap, projections)
    return None if states is None else (snap.seq, states)


def _decode(path: Path, data: bytes, kind: type[_T]) -> _T | None:
    try:
        return msgspec.json.decode(data, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        _unusable(path, exc)
        return None


def _states(path: Path, snap: Snapshot, projections: Sequence[Projection[Any]]) -> dict[str, Any] | None:
    """Each projection's state decoded from the snapshot; None (and a warning) if one does not fit its type."""
    states: dict[str, Any] = {}
    for p in projections:
        try:
            states[p.name] = p.decode_state(bytes(snap.states[p.name]))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            _unusable(path, f"state of {p.name!r}: {exc}")
            return None
    return states


def _unusable(path: Path, why: object) -> None:
    log.warning("snapshot.unusable", path=str(path), error=str(why), action="folding the whole log instead")


def snapshot_anchor(directory: Path | str) -> tuple[int, int, str] | None:
    """``(seq, offset, last_crc)`` of the snapshot, when it records where its seq ends in the log."""
    path = Path(directory) / SNAPSHOT_NAME
    if not path.exists():
        return None
    a = _decode(path, path.read_bytes(), _Anchor)
    if a is None:
        return None
    return (a.seq, a.offset, a.last_crc) if a.offset > 0 and a.seq >= 0 and a.last_crc else None


def load_anchored(
    directory: Path | str, projections: Sequence[Projection[Any]]
) -> tuple[tuple[int, int, str], dict[str, Any]] | None:
    """The snapshot's anchor ``(seq, offset, last_crc)`` and the decoded states of ``projections``, read from
    one version of the file (a writer may replace it meanwhile); None when there is no snapshot, it has no
    anchor, or it lacks one of the projections. The caller checks the anchor against the log
    (:func:`engine.log.anchor_record`) before trusting the states."""
    path = Path(directory) / SNAPSHOT_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    snap = _decode(path, data, Snapshot)
    if snap is None or snap.offset <= 0 or snap.seq < 0 or not snap.last_crc:
        return None
    if any(p.name not in snap.states for p in projections):
        return None
    states = _states(path, snap, projections)
    return None if states is None else ((snap.seq, snap.offset, snap.last_crc), states)
