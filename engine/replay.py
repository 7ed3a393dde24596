"""Replay: rebuild every projection from the log, hash the state, and optionally re-derive derived events.

The live runtime and a replay fold the same records through the same pure projections, so their state
hashes must be equal; a difference means a projection read something that was not in the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from events import EventBody

from .derive import Deriver, derivers
from .effects import EffectsProjection
from .log import read_log
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
    recovery = read_log(path)
    by_type: Counter[str] = Counter()
    checks = {**derivers(), **(extra_derivers or {})} if verify else {}
    mismatches: list[Mismatch] = []
    verified = 0
    count = 0
    last_seq = -1
    first_ts = last_ts = None
    for rec in recovery.records:
        if until is not None and rec.seq > until:
            break
        if checks:
            deriver = checks.get(type(rec.event))
            if deriver is not None:
                verified += 1
                again = deriver(rec.event, states)
                if again != rec.event:
                    mismatches.append(Mismatch(rec.seq, rec.event.type, _diff(rec.event, again)))
        for p in projs:
            states[p.name] = p.apply(states[p.name], rec)
        by_type[rec.event.type] += 1
        count += 1
        last_seq = rec.seq
        if first_ts is None:
            first_ts = rec.ts
        last_ts = rec.ts
    return ReplayResult(
        states=states,
        count=count,
        last_seq=last_seq,
        state_hash=state_hash(projs, states),
        torn_bytes=recovery.torn_bytes,
        by_type=by_type,
        verified=verified,
        mismatches=mismatches,
        first_ts=first_ts,
        last_ts=last_ts,
    )
