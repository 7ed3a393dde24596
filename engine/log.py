"""The append-only JSONL event log: one writer task, group commit, torn-tail recovery, corruption detection.

Durability modes (what "durable" means for :meth:`EventLog.wait_durable` and :meth:`EventLog.append`):

- ``always``: every line is written and fsynced on its own before its append returns;
- ``batch`` (default): group commit. The writer drains every line queued so far, writes them, fsyncs
  once, then releases all their appenders. Under concurrency this amortises the fsync over the batch;
- ``none``: the line is handed to the OS (page cache); a power loss may drop it, a process crash may not.

An fsync error is fatal and never retried (after a failed fsync Linux may have dropped the dirty pages
and mark them clean, so a retry "succeeds" with the data gone: PostgreSQL's fsyncgate). The writer stops
and every pending and later append raises :class:`LogFatalError`; recovery is a restart from the file.

Opening a log recovers a torn tail (bytes after the last newline: what a crash mid-append leaves) by
truncating it, and says so. A *complete*, newline-terminated final line that fails its checksum is no
unfinished write: it is a corrupt record at line N. As in a database's write-ahead log it still ends the
log (nothing after it was acknowledged), but it is reported as what it is, and a writer reopening the log
first copies its bytes (and any torn bytes after them) to a file beside the log
(``events.jsonl.corrupt-line<N>-<sha12>.bin``, fsynced, never deleted) before cutting them from the log.
A bad line anywhere else is never produced by a crash: it is refused with its line number
(:class:`LogCorrupted`), never skipped.

Reading (:func:`scan_log`, :func:`read_log`) goes in blocks of whole lines, each checked as a whole before
its records are handed out, so that a replay folds them while they are still in the CPU cache.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread

from engine.atomic import fsync_dir as _fsync_dir
from engine.lazylog import lazy_logger
from engine.writer_lock import WriterLock
from events import Recorded
from events.codec import CorruptRecord, RecordCodec

__all__ = [
    "Anchor",
    "Durability",
    "EventLog",
    "LogCorrupted",
    "LogFatalError",
    "LogScan",
    "Recovery",
    "anchor_record",
    "read_log",
    "recover_log",
    "scan_log",
    "set_aside_path",
]

log = lazy_logger(__name__)


class Durability(enum.StrEnum):
    ALWAYS = "always"
    BATCH = "batch"
    NONE = "none"


class LogCorrupted(Exception):
    """A line before the tail is not a valid record, or seq is not gap-free. Names the file and line."""

    def __init__(self, path: Path, line_no: int, reason: str) -> None:
        super().__init__(f"{path}:{line_no}: {reason}")
        self.path = path
        self.line_no = line_no
        self.reason = reason


class LogFatalError(RuntimeError):
    """The writer failed (write or fsync error). The process must stop and recover from the file."""


@dataclass(frozen=True)
class Recovery:
    """What opening a log found: the records, and what was (or would be) cut from its end.

    ``size + corrupt_bytes + torn_bytes`` is the file's length: the valid prefix, then a complete final line
    that failed its check (``corrupt_line`` > 0 names it), then bytes after the last newline (a torn write).
    """

    records: list[Recorded]
    size: int  # byte length of the valid prefix
    torn_bytes: int  # bytes after the last newline: an unfinished write
    first_seq: int = 0  # the seq of records[0]: above 0 when only the tail after a snapshot's anchor was read
    corrupt_line: int = 0  # 1-based line number of a complete final line that failed its check; 0: none
    corrupt_bytes: int = 0  # that line's length, newline included
    corrupt_reason: str = ""
    set_aside: str = ""  # where recover_log copied the corrupt bytes (and the torn ones after them)


_CRC_KEY = b',"crc":"'
_CRC_SUFFIX_LEN = len(b',"crc":"00000000"}')


def _glued_record(chunk: bytes, codec: RecordCodec) -> bool:
    """Whether ``chunk`` (an undecodable final line, or the bytes after the last newline) starts with a
    whole valid record followed by more bytes that are not all NUL.

    A crash leaves a prefix of what was being appended (or, after a power loss, a zero-filled block), never
    a whole record glued to further bytes without its newline: that is a damaged newline merging two
    lines, so it is reported rather than cut away with the acknowledged records it holds.
    """
    i = chunk.find(_CRC_KEY)
    while i != -1:
        end = i + _CRC_SUFFIX_LEN
        if end < len(chunk) and chunk[end:].strip(b"\0"):
            try:
                codec.decode(chunk[:end])
            except CorruptRecord:
                pass
            else:
                return True
        i = chunk.find(_CRC_KEY, i + 1)
    return False


# Bytes per block of a scan. A block's lines, envelopes and records stay in the CPU cache from decoding
# through the crc check to the consumer's fold; decoding a 220 MB log in one piece was ~1.7x slower per
# line than in 64 KiB blocks (benchmarks/log_bench.py), most of it cache misses on a million fresh objects.
_BLOCK = 64 * 1024


class LogScan:
    """One pass over a log's bytes: iterate it for blocks of checked records, in order.

    Every whole line is checked (crc, decoding, seq gap-free from 0) before the block holding it is
    yielded. A bad line before the tail raises :class:`LogCorrupted` when the scan reaches it (so a
    consumer may have seen the blocks before it); an undecodable complete final line is a corrupt record
    (``corrupt_line``): the scan stops before it, as before bytes after the last newline (a torn tail).
    Once iterated to the end, ``size`` is the byte length of the valid prefix, ``corrupt_bytes`` the length
    of a corrupt final line after it, and ``torn_bytes`` the length of the torn tail after the last newline.
    """

    def __init__(
        self, path: Path, data: bytes, codec: RecordCodec, *, first_seq: int = 0, base: int = 0, records: bool = True
    ) -> None:
        """``data``: the log's bytes from offset ``base``, where the record of seq ``first_seq`` starts.

        ``records=False``: a block checked by the fast path holds the decoder's envelopes, which carry the same
        ``seq``, ``ts`` and ``event`` as a Recorded but are not one (:meth:`RecordCodec.decode_block`): for a
        consumer that only reads those three attributes and keeps nothing (a replay's fold)."""
        self.path = path
        self.records = records
        self.data = data
        self.codec = codec
        self.first_seq = first_seq
        self.base = base
        self.size = base
        self.torn_bytes = 0
        self.corrupt_line = 0
        self.corrupt_bytes = 0
        self.corrupt_reason = ""

    def __iter__(self) -> Iterator[list[Recorded]]:
        data, codec = self.data, self.codec
        end = data.rfind(b"\n") + 1  # bytes after the last newline are a torn tail
        pos, seq = 0, self.first_seq
        torn_line = False
        while pos < end:
            stop = data.rfind(b"\n", pos, pos + _BLOCK) + 1
            if stop == 0:  # a line longer than a block
                stop = data.index(b"\n", pos) + 1
            # The records are acyclic and mostly untracked, but a block allocates thousands of objects: with
            # the collector on, its passes over the consumer's growing state find nothing.
            enabled = gc.isenabled()
            gc.disable()
            try:
                # Fast path: every line of the block decodes in one pass and seq runs on. Otherwise line by
                # line, which upcasts old versions, or finds and reports (or, on the file's last line, cuts)
                # whatever the fast path refused.
                block = codec.decode_block(data, stop, first_seq=seq, start=pos, records=self.records)
                done = stop
                if block is None:
                    block, done = self._careful(pos, stop, end, seq)
            finally:
                if enabled:
                    gc.enable()
            seq += len(block)
            if block:
                yield block
            pos = done
            if done < stop:  # the file's last complete line failed its check
                torn_line = True
                break
        self.size, self.corrupt_bytes, self.torn_bytes = self.base + pos, end - pos, len(data) - end
        if _glued_record(data[end:], codec):
            line_no = seq + 1 + torn_line
            raise LogCorrupted(self.path, line_no, "a whole record followed by stray bytes: its newline was damaged")

    def _careful(self, pos: int, stop: int, end: int, seq: int) -> tuple[list[Recorded], int]:
        """Decode ``data[pos:stop]`` line by line. Returns the records and where they end (before a corrupt
        complete final line of the file, if that is where they stop)."""
        data, codec = self.data, self.codec
        records: list[Recorded] = []
        while pos < stop:
            nl = data.index(b"\n", pos)
            line_no = seq + len(records) + 1
            try:
                rec = codec.decode(data[pos:nl])
            except CorruptRecord as exc:
                if nl + 1 == end and not _glued_record(data[pos:nl], codec):
                    # A complete final line that fails its check ends the log (as in a write-ahead log: nothing
                    # after it was acknowledged), but it is no unfinished write: it is reported as corrupt.
                    self.corrupt_line, self.corrupt_reason = line_no, str(exc)
                    return records, pos
                raise LogCorrupted(self.path, line_no, str(exc)) from None
            if rec.seq != line_no - 1:
                raise LogCorrupted(
                    self.path, line_no, f"seq {rec.seq} where {line_no - 1} was expected (gap or duplicate)"
                )
            records.append(rec)
            pos = nl + 1
        return records, pos


def scan_log(path: Path | str, codec: RecordCodec | None = None, *, records: bool = True) -> LogScan:
    """Read a log file for one pass in blocks (see :class:`LogScan`); a replay folds each block as it comes."""
    p = Path(path)
    return LogScan(p, p.read_bytes(), codec or RecordCodec(), records=records)


#: (seq, byte offset just past its line, that line's crc field): where a snapshot says its seq ends
Anchor = tuple[int, int, str]


def anchor_record(path: Path | str, anchor: Anchor, codec: RecordCodec | None = None) -> Recorded | None:
    """The anchor's record, if the line that ends at its offset is that record (same seq, same crc: the very
    line a snapshot folded last); None if not (a log cut or regrown since, or shorter than the offset)."""
    seq, offset, crc = anchor
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if offset > size:
            return None
        back = 4096
        while True:  # the last line before the offset: read back until its start
            lo = max(0, offset - back)
            f.seek(lo)
            head = f.read(offset - lo)
            nl = head.rfind(b"\n", 0, len(head) - 1)
            if nl >= 0 or lo == 0:
                break
            back *= 4
    line = head[nl + 1 :]
    if not line.endswith(b"\n"):
        return None
    try:
        rec = (codec or RecordCodec()).decode(line)
    except CorruptRecord:
        return None
    if rec.seq != seq or not line.endswith(b'"crc":"%s"}\n' % crc.encode()):
        return None
    return rec


def _tail_after(path: Path, anchor: Anchor, codec: RecordCodec) -> bytes | None:
    """The log's bytes after the anchor, if :func:`anchor_record` finds its record; None if not."""
    if anchor_record(path, anchor, codec) is None:
        return None
    with open(path, "rb") as f:
        f.seek(anchor[1])
        return f.read()


def read_log(path: Path | str, codec: RecordCodec | None = None, *, start: Anchor | None = None) -> Recovery:
    """Read and check a log without changing it (a torn tail is reported, not cut).

    With ``start`` (a snapshot's anchor), only the records after it are read and checked, when the line
    before its offset is the anchor's record; otherwise the whole log is, as without it."""
    p = Path(path)
    c = codec or RecordCodec()
    tail = _tail_after(p, start, c) if start is not None else None
    if tail is not None and start is not None:
        scan = LogScan(p, tail, c, first_seq=start[0] + 1, base=start[1])
    else:
        scan = scan_log(p, c)
    records: list[Recorded] = []
    # A million records are a million allocations of objects that form no cycles: with the collector on,
    # its young-generation passes run thousands of times (and full passes over the growing list) and find
    # nothing. Off for the scan only: it took about a third of the scan time in benchmarks/log_bench.py.
    enabled = gc.isenabled()
    gc.disable()
    try:
        for block in scan:
            records.extend(block)
    finally:
        if enabled:
            gc.enable()
    return Recovery(
        records,
        scan.size,
        scan.torn_bytes,
        scan.first_seq,
        corrupt_line=scan.corrupt_line,
        corrupt_bytes=scan.corrupt_bytes,
        corrupt_reason=scan.corrupt_reason,
    )


def set_aside_path(path: Path, line_no: int, data: bytes) -> Path:
    """Where the corrupt end of ``path`` starting at line ``line_no`` is kept: named by its content, so a
    recovery interrupted before the cut and run again finds its own copy rather than making a second."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    return path.with_name(f"{path.name}.corrupt-line{line_no}-{digest}.bin")


def _set_aside(path: Path, line_no: int, data: bytes) -> Path:
    """Copy ``data`` to its set-aside file durably (written, fsynced, renamed, directory fsynced)."""
    dest = set_aside_path(path, line_no, data)
    if dest.exists() and dest.read_bytes() == data:
        return dest
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dest)
    _fsync_dir(dest.parent)
    return dest


def recover_log(path: Path | str, codec: RecordCodec | None = None, *, start: Anchor | None = None) -> Recovery:
    """Read a log and cut what follows its valid prefix (fsynced), so appends continue from a clean line end.

    A torn tail is cut; a corrupt complete final line (with whatever follows it) is first copied aside
    (:func:`set_aside_path`) and only then cut: its bytes are never deleted.
    """
    p = Path(path)
    rec = read_log(p, codec, start=start)
    if rec.corrupt_bytes:
        with open(p, "rb") as f:
            f.seek(rec.size)
            tail = f.read()
        dest = _set_aside(p, rec.corrupt_line, tail)
        rec = dataclasses.replace(rec, set_aside=str(dest))
        log.warning(
            "log.corrupt_record_set_aside",
            path=str(p),
            line=rec.corrupt_line,
            reason=rec.corrupt_reason,
            set_aside=str(dest),
            bytes=len(tail),
            at_offset=rec.size,
        )
    if rec.torn_bytes or rec.corrupt_bytes:
        with open(p, "r+b") as f:
            f.truncate(rec.size)
            f.flush()
            os.fsync(f.fileno())
        if not rec.corrupt_bytes:
            log.warning("log.torn_tail_recovered", path=str(p), dropped_bytes=rec.torn_bytes, at_offset=rec.size)
    return rec


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class _Batch:
    __slots__ = ("done", "error", "lines", "records")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.records: list[Recorded] = []
        self.done = anyio.Event()
        self.error: BaseException | None = None


class EventLog:
    """An open log file with one writer task. Use :meth:`open`, then run :meth:`run_writer` in a task group.

    ``on_durable`` is called by the writer, in seq order, with each batch of records once the batch
    satisfies the durability mode and before their appenders are released: the runtime publishes there.
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        durability: Durability,
        recovery: Recovery,
        codec: RecordCodec,
        lock: WriterLock | None = None,
    ) -> None:
        self.path = path
        self.writer_lock = lock
        self.durability = durability
        self.recovery = recovery
        self.codec = codec
        self.on_durable: Callable[[list[Recorded]], None] = lambda _records: None
        self._fd = fd
        self._pending = _Batch()
        self._inflight: _Batch | None = None  # the batch the writer is flushing now
        self._wake = anyio.Event()
        self._fatal: BaseException | None = None
        self._closed = False
        self.bytes_written = recovery.size
        self._base_seq = recovery.first_seq + len(recovery.records)
        self._appended = 0
        #: the byte length the log will have once everything submitted is written, and the crc field of the
        #: last line submitted (or recovered): a snapshot's anchor
        self.end_offset = recovery.size
        self._last_line = b""
        #: the last seq whose batch satisfied the durability mode (-1: none)
        self.durable_seq = self._base_seq - 1

    @classmethod
    def open(
        cls, path: Path | str, durability: Durability | str = Durability.BATCH, *, start: Anchor | None = None
    ) -> EventLog:
        """Open (creating if absent) and recover a log. Synchronous: call it before starting tasks.

        ``start``: a snapshot's anchor; only the records after it are read (see :func:`read_log`).

        Takes the run's writer lock (:mod:`engine.writer_lock`) first, before reading the log back: a second
        writer on the same directory raises :class:`~engine.writer_lock.RunLocked` and touches nothing.
        :meth:`close` releases it."""
        p = Path(path)
        codec = RecordCodec()
        lock = WriterLock.acquire(p.parent)
        try:
            created = not p.exists()
            if created:
                p.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
                _fsync_dir(p.parent)  # the new file's directory entry must survive a power loss too
                recovery = Recovery([], 0, 0)
            else:
                recovery = recover_log(p, codec, start=start)
                fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        except BaseException:
            lock.release()
            raise
        return cls(p, fd, Durability(durability), recovery, codec, lock)

    @property
    def next_seq(self) -> int:
        return self._base_seq + self._appended

    def submit(self, rec: Recorded) -> anyio.Event:
        """Queue one record (synchronously, so callers control order). Returns the event its batch sets."""
        if self._fatal is not None:
            raise LogFatalError(f"{self.path}: the log writer failed earlier: {self._fatal}") from self._fatal
        if self._closed:
            raise LogFatalError(f"{self.path}: the log is closed")
        line = self.codec.encode(rec)
        self._pending.lines.append(line)
        self._pending.records.append(rec)
        self._appended += 1
        self.end_offset += len(line)
        self._last_line = line
        self._wake.set()
        return self._pending.done

    async def append(self, rec: Recorded) -> None:
        """Queue one record and wait until its durability mode is satisfied."""
        batch = self._pending
        done = self.submit(rec)
        await done.wait()
        if batch.error is not None:
            raise LogFatalError(f"{self.path}: {batch.error}") from batch.error

    def anchor(self) -> Anchor | None:
        """``(seq, offset, crc)`` of the last record submitted in this process (None before the first)."""
        if not self._last_line:
            return None
        crc = self._last_line[-11:-3].decode()  # ...,"crc":"xxxxxxxx"}\n
        return (self.next_seq - 1, self.end_offset, crc)

    async def wait_durable(self, seq: int) -> None:
        """Wait until record ``seq`` (already submitted) satisfies the durability mode.

        Batches complete in seq order, so waiting for the batch that holds ``seq`` is enough: the pending one
        if ``seq`` was queued after the writer took its last batch, else the one being flushed.
        """
        if seq <= self.durable_seq:
            return
        if seq >= self.next_seq:
            raise ValueError(f"{self.path}: seq {seq} was never submitted (next is {self.next_seq})")
        pending = self._pending
        batch = pending if pending.records and seq >= pending.records[0].seq else self._inflight
        if batch is None:  # pragma: no cover - the writer updates durable_seq before it drops _inflight
            raise AssertionError(f"seq {seq} is neither durable, flushing nor pending")
        await batch.done.wait()
        self.check(batch.error)

    async def throttle(self, max_pending: int) -> None:
        """Yield to the writer, and wait while more than ``max_pending`` lines are queued (bounded memory)."""
        if len(self._pending.lines) <= max_pending:
            await anyio.lowlevel.checkpoint()
            return
        while len(self._pending.lines) > max_pending:
            batch = self._inflight or self._pending
            await batch.done.wait()
            self.check(batch.error)

    def check(self, batch_error: BaseException | None) -> None:
        """Raise :class:`LogFatalError` if the batch a caller waited on failed."""
        if batch_error is not None:
            raise LogFatalError(f"{self.path}: {batch_error}") from batch_error

    def current_batch(self) -> _Batch:
        """The batch the next :meth:`submit` joins (read it before submitting to check its error after)."""
        return self._pending

    async def run_writer(self) -> None:
        """The single writer. Runs until cancelled (after draining what it already took) or a fatal error."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            batch, self._pending = self._pending, _Batch()
            if not batch.lines:
                continue
            self._inflight = batch
            try:
                await self._flush(batch)
            except BaseException as exc:
                # Fatal, never retried: release everyone with the error, refuse later appends, stop.
                self._fatal = exc
                batch.error = exc
                self._pending.error = exc
                batch.done.set()
                self._pending.done.set()
                log.error("log.write_failed", path=str(self.path), error=repr(exc))
                raise
            self.bytes_written += sum(len(line) for line in batch.lines)
            self.durable_seq = batch.records[-1].seq
            self.on_durable(batch.records)
            self._inflight = None
            batch.done.set()

    async def _flush(self, batch: _Batch) -> None:
        fd = self._fd
        if self.durability is Durability.NONE:
            _write_all(fd, b"".join(batch.lines))
        elif self.durability is Durability.BATCH:
            data = b"".join(batch.lines)
            # Shielded: a cancelled writer must not leave a half-acknowledged batch behind.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_write_and_sync, fd, data)
        else:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_write_and_sync_each, fd, batch.lines)

    async def drain(self) -> None:
        """Wait until everything submitted so far is durable."""
        # Batches complete in order: the pending one if it has lines, else the one being flushed (which
        # the writer has already taken out of ``_pending``).
        batch = self._pending if self._pending.lines else self._inflight
        if batch is not None:
            await batch.done.wait()
            self.check(batch.error)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)
        if self.writer_lock is not None:
            self.writer_lock.release()


def _write_and_sync(fd: int, data: bytes) -> None:
    _write_all(fd, data)
    os.fsync(fd)


def _write_and_sync_each(fd: int, lines: list[bytes]) -> None:
    for line in lines:
        _write_all(fd, line)
        os.fsync(fd)
