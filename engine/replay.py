"""Replay: rebuild every projection from the log, hash the state, and optionally re-derive derived events.

The live runtime and a replay fold the same records through the same pure projections, so their state
hashes must be equal; a difference means a projection read something that was not in the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from events import EventBody

from .derive import Deriver, derivers
from .effects import EffectsProjection
from .folder import Folder
from .log import scan_log
from .projection import Projection, state_hash

__all__ = ["Mismatch", "ReplayResult", "replay"]


@dataclass(frozen=True)
class Mismatch:
    seq: int
    type: str
    fields: dict[str, tuple[Any, Any]]  # field -> (recorded, recomputed)


@dataclass
class ReplayResult:
    states: dict[str, Any]
    count: int
    last_seq: int
    state_hash: str
    torn_bytes: int
    by_type: Counter[str] = field(default_factory=Counter)
    verified: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    first_ts: float | None = None
    last_ts: float | None = None
    corrupt_line: int = 0  # a complete final line that failed its check (the log ends before it); 0: none
    corrupt_bytes: int = 0
    corrupt_reason: str = ""


_event_of = attrgetter("event")


def _diff(a: EventBody, b: EventBody) -> dict[str, tuple[Any, Any]]:
    da, db = msgspec.structs.asdict(a), msgspec.structs.asdict(b)
    return {k: (da.get(k), db.get(k)) for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)}


def replay(
    path: Path | str,
    projections: Sequence[Projection[Any]],
    *,
    until: int | None = None,
    verify: bool = False,
    extra_derivers: Mapping[type[EventBody], Deriver] | None = None,
) -> ReplayResult:
    """Fold the log at ``path`` (up to and including seq ``until``) into ``projections`` (+ effects)."""
    projs: list[Projection[Any]] = [*projections, EffectsProjection()]
    states: dict[str, Any] = {p.name: p.initial() for p in projs}
    # The fast path's blocks are the decoder's envelopes (seq, ts, event), not a Recorded made per line: the
    # folds, the derivers and the counts only read those attributes, and nothing here keeps a record.
    scan = scan_log(path, records=False)
    folder = Folder(projs)
    fold_states = [states[p.name] for p in projs]  # the Folder's view; written back below
    # Counted by event class, named at the end: the Folder counts what it folds; --verify counts here.
    by_class: Counter[type[EventBody]] = Counter()
    checks = {**derivers(), **(extra_derivers or {})} if verify else {}
    mismatches: list[Mismatch] = []
    verified = 0
    count = 0
    last_seq = -1
    first_ts = last_ts = None
    # The scan checks a block of records, then it is folded while still in the CPU cache, into every
    # projection in one pass (engine.folder.Folder: one generated loop); only --verify needs every
    # projection's state by name at each record, for the derivers. Past ``until`` the
    # scan still runs to the end: a bad line anywhere, or a torn tail, is reported as by a full replay.
    for block in scan:
        if until is not None and block[-1].seq > until:
            block = block[: max(0, until - block[0].seq + 1)]
            if not block:
                continue
        if checks:
            for rec in block:
                deriver = checks.get(type(rec.event))
                if deriver is not None:
                    verified += 1
                    again = deriver(rec.event, states)
                    if again != rec.event:
                        mismatches.append(Mismatch(rec.seq, rec.event.type, _diff(rec.event, again)))
                for i, p in enumerate(projs):
                    fold_states[i] = p.apply(fold_states[i], rec)
                    states[p.name] = fold_states[i]
            by_class.update(map(type, map(_event_of, block)))
        else:
            folder.fold(block, fold_states)
        count += len(block)
        last_seq = block[-1].seq
        if first_ts is None:
            first_ts = block[0].ts
        last_ts = block[-1].ts
    by_class.update(folder.counts())
    states = {p.name: fold_states[i] for i, p in enumerate(projs)}
    by_type: Counter[str] = Counter()
    for cls, n in by_class.items():
        by_type[cls.type] += n
    return ReplayResult(
        states=states,
        count=count,
        last_seq=last_seq,
        state_hash=state_hash(projs, states),
        torn_bytes=scan.torn_bytes,
        by_type=by_type,
        verified=verified,
        mismatches=mismatches,
        first_ts=first_ts,
        last_ts=last_ts,
        corrupt_line=scan.corrupt_line,
        corrupt_bytes=scan.corrupt_bytes,
        corrupt_reason=scan.corrupt_reason,
    )
