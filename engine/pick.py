"""Reading a few records out of a long log without decoding all of it.

``ait resume`` needs, besides the state the runtime rebuilds from its snapshot and the tail, a handful of
records from anywhere in the log: the run's header (its first line), the outcomes a crash may have left
unrewarded, the events of the episodes it reopens. Decoding the whole log for them cost as much as a full
replay (~1.8 CPU-s per million events). Here a line is decoded only when its bytes hold a needle that every
wanted record's line must hold (``"type":"job.succeeded"``, ``"episode_id":"ep-7"``), found by a C-level
``bytes.find`` over the file: a line that holds a needle by accident (in some other field) is decoded and then
dropped by the caller's exact test, and no wanted line can lack its needle (msgspec writes the envelope and
the body's fields without spaces, in this form). Every decoded line is crc-checked as in a full read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from events import EventBody, Recorded
from events.codec import CorruptRecord, RecordCodec

from .log import LogCorrupted

__all__ = ["first_record", "needle_of_field", "needle_of_type", "pick_records"]


def needle_of_type(cls: type[EventBody]) -> bytes:
    """The bytes every line of an event of ``cls`` holds: its envelope's ``"type":"<name>"``."""
    return b'"type":' + msgspec.json.encode(cls.type)


def needle_of_field(name: str, value: str) -> bytes:
    """The bytes a line holds when its body has the string field ``name`` equal to ``value``."""
    return msgspec.json.encode(name) + b":" + msgspec.json.encode(value)


def first_record(path: Path | str, codec: RecordCodec | None = None) -> Recorded | None:
    """The log's first record (the run's header), reading only its first line; None for an empty log or a
    first line not yet complete. A first line that does not decode raises :class:`LogCorrupted`."""
    p = Path(path)
    with open(p, "rb") as f:
        line = f.readline()
    if not line.endswith(b"\n"):
        return None
    try:
        return (codec or RecordCodec()).decode(line)
    except CorruptRecord as exc:
        raise LogCorrupted(p, 1, str(exc)) from None


def pick_records(
    path: Path | str,
    needles: Iterable[bytes],
    keep: Callable[[Recorded], bool],
    codec: RecordCodec | None = None,
) -> list[Recorded]:
    """The records of the log at ``path`` whose line holds one of ``needles`` and that ``keep`` accepts, in
    log order. Only complete lines are read (a torn tail is not a record)."""
    p = Path(path)
    data = p.read_bytes()
    end = data.rfind(b"\n") + 1
    starts: set[int] = set()
    for needle in set(needles):
        i = data.find(needle, 0, end)
        while i != -1:
            start = data.rfind(b"\n", 0, i) + 1
            starts.add(start)
            nl = data.index(b"\n", i)
            i = data.find(needle, nl + 1, end)  # the next line: one hit per line is enough
    c = codec or RecordCodec()
    out: list[Recorded] = []
    for start in sorted(starts):
        line = data[start : data.index(b"\n", start)]
        try:
            rec = c.decode(line)
        except CorruptRecord as exc:
            line_no = data.count(b"\n", 0, start) + 1
            raise LogCorrupted(p, line_no, str(exc)) from None
        if keep(rec):
            out.append(rec)
    return out
