"""The event log: append/read round trip, durability modes, fatal fsync errors, torn tails, mid-file corruption."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from engine.log import Durability, EventLog, LogCorrupted, LogFatalError, read_log, recover_log
from events import Recorded
from events.codec import encode_record
from tests.engine.spine_model import body_for


def rec(seq: int) -> Recorded:
    return Recorded(seq, 1_764_460_800.0 + seq, body_for(seq))


def write_lines(path: Path, records: list[Recorded]) -> list[bytes]:
    lines = [encode_record(r) for r in records]
    path.write_bytes(b"".join(lines))
    return lines


@asynccontextmanager
async def writing(log: EventLog) -> AsyncIterator[EventLog]:
    """Run the log's writer for the body of the block; close the log after."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(log.run_writer)
            yield log
            await log.drain()
            tg.cancel_scope.cancel()
    finally:
        log.close()


async def append_next(log: EventLog) -> Recorded:
    """Append the next record; reading ``next_seq`` and submitting happen with no await in between."""
    r = rec(log.next_seq)
    await log.append(r)
    return r


class FsyncSpy:
    """Replaces ``os.fsync``: counts calls and remembers the file size each call made durable."""

    def __init__(self, real: Callable[[int], None], fail: BaseException | None = None) -> None:
        self.real = real
        self.fail = fail
        self.calls = 0
        self.synced_sizes: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        with self.lock:
            self.calls += 1
        if self.fail is not None:
            raise self.fail
        size = os.fstat(fd).st_size
        self.real(fd)
        with self.lock:
            self.synced_sizes.append(size)

    @property
    def synced(self) -> int:
        with self.lock:
            return max(self.synced_sizes, default=0)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> FsyncSpy:
    s = FsyncSpy(os.fsync)
    monkeypatch.setattr(os, "fsync", s)
    return s


async def test_round_trip_and_reopen_continues_seq(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    async with writing(EventLog.open(path)) as log:
        written = [await append_next(log) for _ in range(10)]
    assert read_log(path).records == written
    log2 = EventLog.open(path)
    assert log2.next_seq == 10 and log2.recovery.records == written and log2.bytes_written == path.stat().st_size
    async with writing(log2):
        written.append(await append_next(log2))
    assert read_log(path).records == written


@pytest.mark.parametrize("mode", list(Durability))
async def test_each_append_returns_only_once_its_mode_is_satisfied(
    tmp_path: Path, spy: FsyncSpy, mode: Durability
) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog.open(path, mode)
    spy.calls = 0  # the directory fsync at creation does not count
    ends: list[int] = []
    async with writing(log):
        for _ in range(5):
            await append_next(log)
            ends.append(path.stat().st_size)
            # the line is in the file (written) when append returns ...
            assert read_log(path).records[-1].seq == len(ends) - 1
            # ... and synced too, unless the mode says not to sync
            if mode is Durability.NONE:
                assert spy.calls == 0
            else:
                assert spy.synced >= ends[-1]
    assert spy.calls == {Durability.NONE: 0, Durability.BATCH: 5, Durability.ALWAYS: 5}[mode]


@pytest.mark.parametrize("mode", [Durability.ALWAYS, Durability.BATCH])
async def test_concurrent_appends(tmp_path: Path, spy: FsyncSpy, mode: Durability) -> None:
    """``always`` fsyncs every line on its own; ``batch`` commits a group with one fsync. Either way no
    append returns before its own line is synced."""
    path = tmp_path / "events.jsonl"
    log = EventLog.open(path, mode)
    spy.calls = 0
    synced_at_return: dict[int, int] = {}
    n = 40

    async def producer() -> None:
        r = await append_next(log)
        synced_at_return[r.seq] = spy.synced

    async with writing(log), anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(producer)
    data = path.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    assert [r.seq for r in read_log(path).records] == list(range(n))
    for seq, synced in synced_at_return.items():
        assert synced >= ends[seq], f"append of seq {seq} returned before its line was synced"
    if mode is Durability.ALWAYS:
        assert spy.calls == n
    else:
        assert 1 <= spy.calls < n  # group commit: many lines per fsync


async def test_fsync_error_is_fatal_and_never_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog.open(path, Durability.BATCH)
    entered, gate = threading.Event(), threading.Event()
    calls = 0

    def failing_fsync(fd: int) -> None:
        nonlocal calls
        calls += 1
        entered.set()
        gate.wait(5)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    writer_errors: list[BaseException] = []
    outcomes: dict[str, BaseException] = {}

    async def run_writer() -> None:
        try:
            await log.run_writer()
        except OSError as exc:
            writer_errors.append(exc)

    async def append(name: str) -> None:
        try:
            await append_next(log)
        except LogFatalError as exc:
            outcomes[name] = exc

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_writer)
            tg.start_soon(append, "first")
            assert await anyio.to_thread.run_sync(entered.wait, 5)  # the first batch is inside fsync now
            tg.start_soon(append, "waiting")  # queued behind the failing batch
            await anyio.sleep(0.01)
            gate.set()
    finally:
        log.close()
    assert set(outcomes) == {"first", "waiting"}
    assert len(writer_errors) == 1 and writer_errors[0].errno == errno.EIO
    # Later appends are refused at once; nothing retried the fsync.
    with pytest.raises(LogFatalError, match="the log writer failed earlier"):
        log.submit(rec(log.next_seq))
    with pytest.raises(LogFatalError):
        await log.append(rec(log.next_seq))
    assert calls == 1


async def test_drain_waits_for_the_batch_being_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog.open(path, Durability.BATCH)
    real = os.fsync
    entered, synced = threading.Event(), threading.Event()

    def slow_fsync(fd: int) -> None:
        entered.set()
        time.sleep(0.2)
        real(fd)
        synced.set()

    monkeypatch.setattr(os, "fsync", slow_fsync)
    async with writing(log):
        log.submit(rec(0))
        # the writer has taken the batch out of the queue and is syncing it
        assert await anyio.to_thread.run_sync(entered.wait, 5)
        await log.drain()
        assert synced.is_set()


def test_torn_tail_is_truncated_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(5)])
    good = path.stat().st_size
    torn = encode_record(rec(5))[:37]
    with path.open("ab") as f:
        f.write(torn)
    # read_log reports the torn tail without touching the file
    assert read_log(path).torn_bytes == len(torn) and path.stat().st_size == good + len(torn)
    with capture_logs() as logs:
        log = EventLog.open(path)
    log.close()
    assert path.stat().st_size == good and path.read_bytes() == b"".join(lines)
    assert log.recovery.torn_bytes == len(torn) and log.next_seq == 5
    assert [e for e in logs if e["event"] == "log.torn_tail_recovered"] == [
        {
            "event": "log.torn_tail_recovered",
            "log_level": "warning",
            "path": str(path),
            "dropped_bytes": len(torn),
            "at_offset": good,
        }
    ]


async def test_appends_after_a_recovered_tail_start_on_a_clean_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_lines(path, [rec(i) for i in range(3)])
    with path.open("ab") as f:
        f.write(b'{"seq":3,"ts":1')
    async with writing(EventLog.open(path)) as log:
        await append_next(log)
    assert [r.seq for r in read_log(path).records] == [0, 1, 2, 3]


def _contents(directory: Path) -> dict[str, bytes]:
    # writer.lock is the one-writer lock file (its content is the last holder's pid), not log data
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != "writer.lock"}


def _flip_last_line(path: Path, lines: list[bytes]) -> bytes:
    """Damage one byte of the last line, keeping its newline: a complete line that fails its checksum."""
    last = bytearray(lines[-1])
    last[20] ^= 0x01
    path.write_bytes(b"".join(lines[:-1]) + bytes(last))
    return bytes(last)


def test_a_complete_final_line_failing_its_checksum_is_a_corrupt_record_not_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(4)])
    last = _flip_last_line(path, lines)
    found = read_log(path)  # reading reports it and changes nothing
    assert (found.corrupt_line, found.corrupt_bytes, found.torn_bytes) == (4, len(last), 0)
    assert "checksum" in found.corrupt_reason and path.read_bytes().endswith(last)
    with capture_logs() as logs:
        recovery = recover_log(path)
    assert [r.seq for r in recovery.records] == [0, 1, 2] and recovery.torn_bytes == 0
    assert recovery.corrupt_line == 4
    # the log ends before it (a write-ahead log's convention), but its bytes are kept beside the log
    assert path.read_bytes() == b"".join(lines[:-1])
    aside = Path(recovery.set_aside)
    assert aside.parent == tmp_path and aside.read_bytes() == last and "line4" in aside.name
    assert [e["event"] for e in logs] == ["log.corrupt_record_set_aside"]
    assert logs[0]["line"] == 4 and logs[0]["set_aside"] == str(aside)


def test_an_unterminated_final_line_is_a_torn_tail_not_a_corrupt_record(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(4)])
    damaged = bytearray(lines[-1][:-1])  # the same damage, but the line never got its newline
    damaged[20] ^= 0x01
    path.write_bytes(b"".join(lines[:-1]) + bytes(damaged))
    with capture_logs() as logs:
        recovery = recover_log(path)
    assert (recovery.corrupt_line, recovery.corrupt_bytes, recovery.torn_bytes) == (0, 0, len(damaged))
    assert recovery.set_aside == "" and sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]
    assert [e["event"] for e in logs] == ["log.torn_tail_recovered"]


def test_a_corrupt_final_line_with_torn_bytes_after_it_is_set_aside_whole(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(4)])
    last = _flip_last_line(path, lines)
    with path.open("ab") as f:
        f.write(b'{"seq":4,"ts')
    recovery = recover_log(path)
    assert (recovery.corrupt_line, recovery.corrupt_bytes, recovery.torn_bytes) == (4, len(last), 12)
    assert Path(recovery.set_aside).read_bytes() == last + b'{"seq":4,"ts'


async def test_set_aside_bytes_survive_a_resume(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(4)])
    last = _flip_last_line(path, lines)
    async with writing(EventLog.open(path)) as log:  # the writer that reopens the log sets the record aside
        assert log.recovery.corrupt_line == 4 and log.next_seq == 3
        await append_next(log)
        await append_next(log)
    aside = Path(log.recovery.set_aside)
    async with writing(EventLog.open(path)) as again:  # a resume: a clean log, the set-aside file untouched
        assert again.recovery.corrupt_line == 0 and again.recovery.set_aside == ""
        await append_next(again)
    assert [r.seq for r in read_log(path).records] == [0, 1, 2, 3, 4, 5]
    assert _contents(tmp_path) == {"events.jsonl": path.read_bytes(), aside.name: last}


def test_a_recovery_interrupted_after_setting_aside_keeps_one_copy(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(3)])
    _flip_last_line(path, lines)
    damaged = path.read_bytes()
    first = recover_log(path)
    path.write_bytes(damaged)  # as if the cut had not reached the disk
    second = recover_log(path)
    assert first.set_aside == second.set_aside
    assert len(list(tmp_path.glob("*.corrupt-*"))) == 1


def test_a_zero_filled_tail_is_torn(tmp_path: Path) -> None:
    """What a power loss can leave: the file extended but its last block never written (NULs)."""
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(4)])
    path.write_bytes(b"".join(lines)[:-1] + b"\0" * 100)  # the last line lost its newline and more
    assert [r.seq for r in recover_log(path).records] == [0, 1, 2]


small_logs = st.integers(1, 6)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=small_logs, data=st.data())
def test_a_cut_at_any_byte_recovers_exactly_the_whole_lines(tmp_path: Path, n: int, data: st.DataObject) -> None:
    path = tmp_path / f"cut-{n}.jsonl"
    lines = write_lines(path, [rec(i) for i in range(n)])
    full = b"".join(lines)
    cut = data.draw(st.integers(0, len(full)))
    path.write_bytes(full[:cut])
    recovery = recover_log(path)
    whole = 0
    while whole < n and len(b"".join(lines[: whole + 1])) <= cut:
        whole += 1
    assert [r.seq for r in recovery.records] == list(range(whole))
    assert path.read_bytes() == b"".join(lines[:whole])


def test_mid_file_corruption_names_the_line_and_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(6)])
    for bad in range(5):  # every line but the last (a damaged last line ends the log: tested above)
        for offset in (0, len(lines[bad]) // 2, len(lines[bad]) - 1):  # first byte, middle, its newline
            damaged = [bytearray(line) for line in lines]
            damaged[bad][offset] ^= 0x04
            blob = b"".join(bytes(d) for d in damaged)
            path.write_bytes(blob)
            with pytest.raises(LogCorrupted) as info:
                EventLog.open(path)
            assert info.value.line_no == bad + 1 and info.value.path == path
            assert str(info.value).startswith(f"{path}:{bad + 1}: ")
            assert path.read_bytes() == blob  # nothing was truncated


def test_a_damaged_final_newline_is_reported_not_cut(tmp_path: Path) -> None:
    """The last record glued to a stray byte is no torn write: cutting it would lose an acknowledged event."""
    path = tmp_path / "events.jsonl"
    lines = write_lines(path, [rec(i) for i in range(3)])
    path.write_bytes(b"".join(lines)[:-1] + b"X")
    with pytest.raises(LogCorrupted) as info:
        recover_log(path)
    assert info.value.line_no == 3


@pytest.mark.parametrize(
    ("seqs", "line_no", "reason"),
    [
        ([0, 1, 3, 4], 3, "seq 3 where 2 was expected"),
        ([0, 1, 1, 2], 3, "seq 1 where 2 was expected"),
        ([1, 2], 1, "seq 1 where 0 was expected"),
        ([0, 1, 2, 4], 4, "seq 4 where 3 was expected"),  # a gap on the final line is not a torn tail
    ],
)
def test_seq_gaps_and_duplicates_are_corruption(tmp_path: Path, seqs: list[int], line_no: int, reason: str) -> None:
    path = tmp_path / "events.jsonl"
    write_lines(path, [rec(s) for s in seqs])
    with pytest.raises(LogCorrupted, match=reason) as info:
        read_log(path)
    assert info.value.line_no == line_no


def test_unknown_event_type_mid_file_is_corruption(tmp_path: Path) -> None:
    import zlib

    path = tmp_path / "events.jsonl"
    head = b'{"seq":1,"ts":1.0,"type":"nope.unheard_of","v":1,"body":{}'
    alien = b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head))
    path.write_bytes(encode_record(rec(0)) + alien + encode_record(rec(2)))
    with pytest.raises(LogCorrupted, match=r"unknown event type 'nope\.unheard_of'") as info:
        read_log(path)
    assert info.value.line_no == 2


def test_open_creates_the_file_and_its_directory(tmp_path: Path, spy: FsyncSpy) -> None:
    path = tmp_path / "run" / "events.jsonl"
    log = EventLog.open(path)
    log.close()
    assert path.exists() and path.stat().st_size == 0
    assert spy.calls == 1  # the new directory entry is synced


def test_submit_on_a_closed_log_is_refused(tmp_path: Path) -> None:
    log = EventLog.open(tmp_path / "events.jsonl")
    log.close()
    with pytest.raises(LogFatalError, match="closed"):
        log.submit(rec(0))
