"""The cross-run spend ledger ``runs/costs.jsonl`` and its summaries (``ait costs``).

One JSON line per settled cost of any run, keyed by ``(run_id, seq)`` of the ``cost.settled`` record, so
appending is idempotent: a reactor appends each settlement as it happens and :meth:`CostsLedger.sync`
appends whatever a crash left out on resume. The run's log stays the truth; the ledger is a derived, shared
index that the global budget cap reads (``total_usd(exclude_run=...)``).

Several processes may append at once: every append holds an exclusive ``flock`` and writes whole lines. A
line torn by a crash mid-append is cut off by the next appender; readers ignore an unterminated last line.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import io
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import msgspec
from rich.table import Table

from engine.fmt import format_count, format_hours, format_usd, render_plain
from events import Recorded
from events.money import CostSettled

__all__ = [
    "GROUPINGS",
    "CostsLedger",
    "LedgerError",
    "LedgerRow",
    "SummaryRow",
    "costs_command",
    "rows_from_log",
    "summarise",
]

GROUPINGS: Final = ("run", "kind", "day", "item")


class LedgerError(ValueError):
    """A ledger line that does not decode (the message names the file and line)."""


class LedgerRow(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    seq: int
    ts: float
    day: str  # UTC date of ts, for summaries by day
    kind: str
    ref: str
    usd: float
    item: str = ""
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    train_tokens: int = 0
    seconds: float = 0.0
    episode_id: str = ""
    reservation_id: str = ""
    reserved_usd: float = 0.0
    price_version: str = ""
    estimated: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return (self.run_id, self.seq)


def row_of(run_id: str, rec: Recorded) -> LedgerRow:
    e = rec.event
    if not isinstance(e, CostSettled):
        raise TypeError(f"seq {rec.seq}: a ledger row comes from cost.settled, not {e.type}")
    return LedgerRow(
        run_id=run_id,
        seq=rec.seq,
        ts=rec.ts,
        day=dt.datetime.fromtimestamp(rec.ts, dt.UTC).date().isoformat(),
        kind=e.kind,
        ref=e.ref,
        usd=e.usd,
        item=e.item,
        input_tokens=e.input_tokens,
        cached_input_tokens=e.cached_input_tokens,
        output_tokens=e.output_tokens,
        train_tokens=e.train_tokens,
        seconds=e.seconds,
        episode_id=e.episode_id,
        reservation_id=e.reservation_id,
        reserved_usd=e.reserved_usd,
        price_version=e.price_version,
        estimated=e.estimated,
    )


def rows_from_log(run_id: str, records: Iterable[Recorded]) -> list[LedgerRow]:
    """The ledger rows a run's log implies, in log order."""
    return [row_of(run_id, r) for r in records if isinstance(r.event, CostSettled)]


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(LedgerRow)


class CostsLedger:
    """Append-only JSONL ledger shared by every run. Keeps an index of the keys it has seen."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._rows: list[LedgerRow] = []
        self._keys: set[tuple[str, int]] = set()
        self._offset = 0  # bytes of the file already read into _rows
        self._lines = 0  # lines of the file already read, for error messages

    def _parse(self, data: bytes) -> None:
        for i, line in enumerate(data.splitlines(), start=self._lines + 1):
            if not line.strip():
                continue
            try:
                row = _DECODER.decode(line)
            except msgspec.DecodeError as exc:
                raise LedgerError(f"{self.path}:{i}: not a ledger row: {exc}") from None
            if row.key not in self._keys:  # duplicates from racing appenders are harmless
                self._keys.add(row.key)
                self._rows.append(row)

    def _refresh(self, f: io.BufferedRandom | io.BufferedReader) -> None:
        """Read the complete lines appended since the last read (by anyone)."""
        f.seek(self._offset)
        data = f.read()
        end = data.rfind(b"\n") + 1  # an unterminated last line is being written or was torn: not yet a row
        self._parse(data[:end])
        self._offset += end
        self._lines += data.count(b"\n", 0, end)

    @contextmanager
    def _locked(self) -> Iterator[io.BufferedRandom]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield f
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def read(self) -> list[LedgerRow]:
        """Every row, in file order (a missing file is an empty ledger)."""
        if self.path.exists():
            with open(self.path, "rb") as f:
                self._refresh(f)
        return list(self._rows)

    def append(self, rows: Iterable[LedgerRow]) -> int:
        """Append the rows whose ``(run_id, seq)`` is not in the ledger yet; returns how many were new."""
        with self._locked() as f:
            self._refresh(f)
            size = f.seek(0, os.SEEK_END)
            if size > self._offset:
                # A torn line left by a crashed appender: we hold the lock, so no one is writing it. Cut it off.
                f.truncate(self._offset)
            new = [r for r in rows if r.key not in self._keys]
            fresh: dict[tuple[str, int], LedgerRow] = {}
            for r in new:
                fresh.setdefault(r.key, r)
            if not fresh:
                return 0
            data = b"".join(_ENCODER.encode(r) + b"\n" for r in fresh.values())
            f.seek(self._offset)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            self._offset += len(data)
            self._lines += len(fresh)
            self._rows.extend(fresh.values())
            self._keys.update(fresh)
            return len(fresh)

    def record(self, run_id: str, rec: Recorded) -> bool:
        """Append one ``cost.settled`` record (what the ledger reactor calls); False if it was already there."""
        return self.append([row_of(run_id, rec)]) == 1

    def sync(self, run_id: str, records: Iterable[Recorded]) -> int:
        """Append every settled cost of the run's log missing from the ledger (on resume); returns how many."""
        return self.append(rows_from_log(run_id, records))

    def total_usd(self, *, exclude_run: str = "") -> float:
        """Settled USD across the ledger, leaving out one run (the global cap's ``spent before``)."""
        return sum(r.usd for r in self.read() if r.run_id != exclude_run)


class SummaryRow(msgspec.Struct, kw_only=True):
    key: str
    entries: int = 0
    usd: float = 0.0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    train_tokens: int = 0
    pod_hours: float = 0.0  # wall hours of pod time settled (per pod, not per GPU)
    estimated_usd: float = 0.0  # part of usd charged at a reservation because the real figure was unknown

    def add(self, r: LedgerRow) -> None:
        self.entries += 1
        self.usd += r.usd
        self.input_tokens += r.input_tokens
        self.cached_input_tokens += r.cached_input_tokens
        self.output_tokens += r.output_tokens
        self.train_tokens += r.train_tokens
        self.pod_hours += r.seconds / 3600.0
        if r.estimated:
            self.estimated_usd += r.usd


_KEYS: Final[dict[str, Callable[[LedgerRow], str]]] = {
    "run": lambda r: r.run_id,
    "kind": lambda r: r.kind,
    "day": lambda r: r.day,
    "item": lambda r: r.item or "(none)",
}


def _check_by(by: str) -> None:
    if by not in GROUPINGS:
        raise ValueError(f"cannot summarise costs by {by!r}; choose one of {', '.join(GROUPINGS)}")


def summarise(rows: Iterable[LedgerRow], by: str) -> list[SummaryRow]:
    """Totals grouped ``by`` one of :data:`GROUPINGS` (run, kind, day, item), sorted by key."""
    _check_by(by)
    key_of = _KEYS[by]
    acc: dict[str, SummaryRow] = {}
    for r in rows:
        k = key_of(r)
        if k not in acc:
            acc[k] = SummaryRow(key=k)
        acc[k].add(r)
    return [acc[k] for k in sorted(acc)]


def costs_command(ledger_path: str | Path, by: str = "run") -> str:
    """What ``ait costs --by <by>`` prints: a table of the ledger's totals grouped ``by``."""
    _check_by(by)
    rows = CostsLedger(ledger_path).read()
    if not rows:
        return f"no costs recorded in {ledger_path}\n"
    table = Table(title=f"costs by {by} ({ledger_path}, {len(rows)} entries)")
    table.add_column(by)
    for name in ("entries", "USD", "input tok", "cached tok", "output tok", "train tok", "pod h", "estimated USD"):
        table.add_column(name, justify="right")

    def cells(s: SummaryRow) -> list[str]:
        return [
            s.key,
            format_count(s.entries),
            format_usd(s.usd, places=4),
            format_count(s.input_tokens),
            format_count(s.cached_input_tokens),
            format_count(s.output_tokens),
            format_count(s.train_tokens),
            format_hours(s.pod_hours * 3600.0),
            format_usd(s.estimated_usd, places=4),
        ]

    for s in summarise(rows, by):
        table.add_row(*cells(s))
    total = SummaryRow(key="total")
    for r in rows:
        total.add(r)
    table.add_section()
    table.add_row(*cells(total))
    # The same plain rendering and number formats as `ait tail`, `ait watch` and `ait report` (engine.fmt).
    return render_plain(table, width=120)
