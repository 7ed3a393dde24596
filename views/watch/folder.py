"""Fold a run's log into the dashboard's projections, incrementally, as the log grows.

:class:`RunFolder` keeps a byte offset into ``events.jsonl`` (:class:`engine.tail.LineReader`): each
:meth:`RunFolder.poll` decodes only the complete lines appended since the last one and folds them into every
projection, so following a long run costs as much as its new events. It never writes to the run and takes no
lock: the run's own writer may be appending from another process. A line that does not decode or a gap in
``seq`` raises :class:`engine.log.LogCorrupted` naming the line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.log import LogCorrupted
from engine.projection import Projection
from engine.tail import LineReader, decode_lines
from events import Recorded, RunFinished
from events.codec import RecordCodec
from handlers.fleet.projection import FleetProjection
from handlers.fleet.queue import QueueProjection
from handlers.registry import default_projections
from views.watch.errors import ErrorsProjection
from views.watch.jobs import JobPhasesProjection
from views.watch.outer import OuterProjection
from views.watch.podtime import PodTimeProjection

__all__ = ["RunFolder", "watch_projections"]


def watch_projections(extra: Sequence[Projection[Any]] = ()) -> list[Projection[Any]]:
    """The domain's projections plus what the dashboard needs, plus ``extra`` (each name once)."""
    projections = default_projections()
    wanted: list[Projection[Any]] = [
        QueueProjection(),
        FleetProjection(),
        OuterProjection(),
        ErrorsProjection(),
        PodTimeProjection(),
        JobPhasesProjection(),
        *extra,
    ]
    for p in wanted:
        if p.name not in {q.name for q in projections}:
            projections.append(p)
    return projections


class RunFolder:
    """The live state of a run as far as its log has been read."""

    def __init__(self, events: Path | str, extra: Sequence[Projection[Any]] = ()) -> None:
        self.path = Path(events)
        self.reader = LineReader(self.path)
        self.codec = RecordCodec()
        self.projections = watch_projections(extra)
        self.states: dict[str, Any] = {p.name: p.initial() for p in self.projections}
        self.last_seq = -1
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.finished = False

    @property
    def events(self) -> int:
        return self.last_seq + 1

    def fold(self, rec: Recorded, line_no: int = 0) -> None:
        if rec.seq != self.last_seq + 1:
            raise LogCorrupted(self.path, line_no, f"seq {rec.seq} follows {self.last_seq}: the log has a gap")
        for p in self.projections:
            self.states[p.name] = p.apply(self.states[p.name], rec)
        self.last_seq = rec.seq
        if self.first_ts is None:
            self.first_ts = rec.ts
        self.last_ts = rec.ts
        if isinstance(rec.event, RunFinished):
            self.finished = True

    def poll(self, max_bytes: int = 16 << 20) -> int:
        """Fold the complete lines appended since the last poll (at most ``max_bytes``); returns how many."""
        lines = self.reader.read_new(max_bytes)
        first_line = self.reader.line_no - len(lines) + 1
        n = 0
        for _raw, rec in decode_lines(self.reader, lines, self.codec):
            self.fold(rec, first_line + n)
            n += 1
        return n

    def catch_up(self) -> int:
        """Poll until the end of what is written now; returns how many records were folded."""
        total = 0
        while n := self.poll():
            total += n
        return total
