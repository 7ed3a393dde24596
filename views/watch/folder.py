"""Fold a run's log into the dashboard's projections, incrementally, as the log grows.

:class:`RunFolder` keeps a byte offset into ``events.jsonl`` (:class:`engine.tail.LineReader`): each
:meth:`RunFolder.poll` decodes only the complete lines appended since the last one and folds them into every
projection, so following a long run costs as much as its new events. It never writes to the run and takes no
lock: the run's own writer may be appending from another process. A line that does not decode or a gap in
``seq`` raises :class:`engine.log.LogCorrupted` naming the line.

It starts from the run's newest snapshot when that holds every projection it folds (a run whose runtime
snapshots the dashboard's views: :mod:`views.snapshot`) and the log's line at the snapshot's anchor is the
snapshot's last record: then only the log after it is read. Otherwise it reads the log from its start.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.log import LogCorrupted, anchor_record
from engine.pick import first_record
from engine.projection import Projection
from engine.snapshot import load_anchored
from engine.tail import LineReader, decode_lines
from events import Recorded, RunFinished, RunResumed
from events.codec import RecordCodec
from handlers.fleet.projection import FleetProjection
from handlers.fleet.queue import QueueProjection
from handlers.registry import default_projections
from handlers.run.summary import RunSummary
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

    def __init__(self, events: Path | str, extra: Sequence[Projection[Any]] = (), *, snapshot: bool = True) -> None:
        """``snapshot``: start from the run's snapshot when it fits (see the module's docstring)."""
        self.path = Path(events)
        self.reader = LineReader(self.path)
        self.codec = RecordCodec()
        self.projections = watch_projections(extra)
        self.states: dict[str, Any] = {p.name: p.initial() for p in self.projections}
        self.last_seq = -1
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.finished = False
        #: the seq of the snapshot this folder started from (-1: it read the log from its start)
        self.snapshot_seq = -1
        if snapshot:
            self._start_from_snapshot()

    def _start_from_snapshot(self) -> None:
        loaded = load_anchored(self.path.parent, self.projections)
        if loaded is None:
            return
        anchor, states = loaded
        last = anchor_record(self.path, anchor, self.codec)
        first = first_record(self.path, self.codec) if last is not None else None
        if last is None or first is None:
            return  # the log was cut or regrown since the snapshot: read it from the start
        self.states.update(states)
        self.last_seq = self.snapshot_seq = anchor[0]
        self.reader.offset, self.reader.line_no = anchor[1], anchor[0] + 1
        self.first_ts, self.last_ts = first.ts, last.ts
        # A run.finished before the snapshot (not followed by a run.resumed): the run summary says so.
        summary = self.states.get("run")
        self.finished = isinstance(summary, RunSummary) and summary.status.startswith("finished:")

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
        # Finished: the run's newest run.finished is not followed by a run.resumed (a resumed run runs again).
        if isinstance(rec.event, RunFinished):
            self.finished = True
        elif isinstance(rec.event, RunResumed):
            self.finished = False

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
