"""Following a log as it grows: a byte-offset reader that consumes only complete lines.

A reader never takes the writer's lock and never sees half a line: bytes after the last newline wait for
the next poll. A line that does not decode is reported with its line number, never skipped silently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from events import Recorded
from events.codec import CorruptRecord, RecordCodec

from .log import LogCorrupted

__all__ = ["LineReader", "TailFilter", "follow_lines"]


@dataclass
class LineReader:
    """Reads complete lines from ``offset`` on, remembering where it stopped."""

    path: Path
    offset: int = 0
    line_no: int = 0

    def read_new(self, max_bytes: int = 16 << 20) -> list[tuple[int, bytes]]:
        """New complete lines since the last call, as (line number, bytes without newline)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read(max_bytes)
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            return []
        out = []
        for line in chunk[:end].split(b"\n")[:-1]:
            self.line_no += 1
            out.append((self.line_no, line))
        self.offset += end
        return out


@dataclass(frozen=True)
class TailFilter:
    """``--type`` (exact name or prefix ending in '.' or '*'), ``--episode`` and ``--job`` filters."""

    types: tuple[str, ...] = ()
    episode: str | None = None
    job: str | None = None

    def __call__(self, rec: Recorded) -> bool:
        if self.types and not any(_type_matches(rec.event.type, t) for t in self.types):
            return False
        if self.episode is not None and getattr(rec.event, "episode_id", None) != self.episode:
            return False
        return self.job is None or getattr(rec.event, "job_id", None) == self.job


def _type_matches(name: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    if pattern.endswith("."):
        return name.startswith(pattern)
    return name == pattern or name.startswith(pattern + ".")


def decode_lines(
    reader: LineReader, lines: list[tuple[int, bytes]], codec: RecordCodec
) -> Iterator[tuple[bytes, Recorded]]:
    for line_no, line in lines:
        try:
            yield line, codec.decode(line)
        except CorruptRecord as exc:
            raise LogCorrupted(reader.path, line_no, str(exc)) from None


async def follow_lines(
    path: Path,
    *,
    follow: bool,
    poll_s: float = 0.2,
    stop: Callable[[], bool] = lambda: False,
) -> AsyncIterator[tuple[bytes, Recorded]]:
    """Yield (raw line, record) for every line; with ``follow``, keep polling for new ones."""
    reader = LineReader(path)
    codec = RecordCodec()
    while True:
        lines = await anyio.to_thread.run_sync(reader.read_new)
        for item in decode_lines(reader, lines, codec):
            yield item
        if not follow or stop():
            return
        if not lines:
            await anyio.sleep(poll_s)
