"""The block scan under the log and replay: with blocks of a few lines, every check still holds at and across
block boundaries (crc, seq, line numbers, torn tails, old schema versions), and replay folds the same state."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.log
from engine.log import LogCorrupted, read_log, recover_log, scan_log
from engine.replay import replay
from events import EventBody, Recorded, event, unregister, upcaster
from events.codec import RecordCodec, encode_record
from tests.engine.spine_model import JobsProjection, MoneyProjection, body_for

N = 30
block_sizes = st.sampled_from([1, 90, 200, 333, 700, 4096])


@contextmanager
def blocks_of(size: int) -> Iterator[None]:
    """Scan in blocks of ``size`` bytes (a line longer than that is a block of its own)."""
    old = engine.log._BLOCK
    engine.log._BLOCK = size
    try:
        yield
    finally:
        engine.log._BLOCK = old


def rec(seq: int) -> Recorded:
    return Recorded(seq, 1_764_460_800.0 + seq, body_for(seq))


def lines_of(seqs: list[int]) -> list[bytes]:
    return [encode_record(rec(s)) for s in seqs]


@pytest.mark.parametrize("size", [1, 90, 200, 700, 10**6])
def test_blocks_hold_every_line_once_in_order(tmp_path: Path, size: int) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(lines_of(list(range(N)))))
    with blocks_of(size):
        blocks = list(scan_log(path))
        assert read_log(path).records == [rec(i) for i in range(N)]
    assert [r for b in blocks for r in b] == [rec(i) for i in range(N)]
    assert (len(blocks) > 1) == (size < path.stat().st_size)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=block_sizes, data=st.data())
def test_a_flipped_byte_before_the_last_line_is_reported_with_its_line(
    tmp_path: Path, size: int, data: st.DataObject
) -> None:
    lines = lines_of(list(range(N)))
    bad = data.draw(st.integers(0, N - 2), label="line")
    offset = data.draw(st.integers(0, len(lines[bad]) - 1), label="offset")
    mask = data.draw(st.integers(1, 255), label="mask")
    damaged = bytearray(lines[bad])
    damaged[offset] ^= mask
    path = tmp_path / "events.jsonl"
    blob = b"".join([*lines[:bad], bytes(damaged), *lines[bad + 1 :]])
    path.write_bytes(blob)
    with blocks_of(size), pytest.raises(LogCorrupted) as info:
        recover_log(path)
    assert info.value.line_no == bad + 1
    assert path.read_bytes() == blob  # nothing was cut


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=block_sizes, data=st.data())
def test_a_cut_at_any_byte_recovers_exactly_the_whole_lines(tmp_path: Path, size: int, data: st.DataObject) -> None:
    lines = lines_of(list(range(N)))
    full = b"".join(lines)
    cut = data.draw(st.integers(0, len(full)))
    path = tmp_path / "events.jsonl"
    path.write_bytes(full[:cut])
    whole = 0
    while whole < N and len(b"".join(lines[: whole + 1])) <= cut:
        whole += 1
    with blocks_of(size):
        recovery = recover_log(path)
    assert recovery.records == [rec(i) for i in range(whole)]
    assert recovery.size == len(b"".join(lines[:whole])) and recovery.torn_bytes == cut - recovery.size
    assert path.read_bytes() == b"".join(lines[:whole])


@pytest.mark.parametrize("size", [1, 200, 700])
@pytest.mark.parametrize("at", [1, 7, 13, N - 1])
def test_a_seq_gap_anywhere_is_reported_with_its_line(tmp_path: Path, size: int, at: int) -> None:
    seqs = [s if s < at else s + 1 for s in range(N)]  # seq ``at`` is missing
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(lines_of(seqs)))
    with blocks_of(size), pytest.raises(LogCorrupted, match=f"seq {at + 1} where {at} was expected") as info:
        read_log(path)
    assert info.value.line_no == at + 1


def test_an_undecodable_last_line_is_torn_whatever_the_blocks(tmp_path: Path) -> None:
    lines = lines_of(list(range(N)))
    last = bytearray(lines[-1])
    last[len(last) // 2] ^= 0x01
    path = tmp_path / "events.jsonl"
    for size in (1, 200, 700, 10**6):
        path.write_bytes(b"".join(lines[:-1]) + bytes(last))
        with blocks_of(size):
            recovery = recover_log(path)
        assert recovery.records == [rec(i) for i in range(N - 1)] and recovery.torn_bytes == len(last)


@pytest.fixture
def gadget() -> Iterator[type[EventBody]]:
    """A test-only event type at schema version 2 (v1 called ``label`` ``name``), taken out again after."""
    name = "test.gadget_made"

    @event(name, version=2)
    class GadgetMade(EventBody, frozen=True, kw_only=True):
        label: str

    @upcaster(name, from_version=1)
    def v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
        d["label"] = d.pop("name")
        return d

    try:
        yield GadgetMade
    finally:
        unregister(name)


def test_old_schema_lines_between_blocks_are_upcast(tmp_path: Path, gadget: type[Any]) -> None:
    codec = RecordCodec()
    records = [Recorded(i, float(i), gadget(label=f"g{i}")) for i in range(N)]
    lines = [codec.encode(r) for r in records]
    for i in (0, 9, 10, N - 1):  # written by an older version of the code
        head = b'{"seq":%d,"ts":%r,"type":"test.gadget_made","v":1,"body":{"name":"g%d"}' % (i, float(i), i)
        lines[i] = b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head))
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(lines))
    for size in (1, 300, 10**6):
        with blocks_of(size):
            assert read_log(path).records == records


@pytest.mark.parametrize("until", [None, 0, 9, 17, N - 1, N + 5])
def test_replay_in_small_blocks_folds_what_a_record_by_record_fold_does(tmp_path: Path, until: int | None) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(lines_of(list(range(N)))))
    records = [rec(i) for i in range(N) if until is None or i <= until]
    with blocks_of(200):
        result = replay(path, [JobsProjection(), MoneyProjection()])
    jobs, spend = JobsProjection(), MoneyProjection()
    expected_jobs, expected_spend = jobs.initial(), spend.initial()
    for r in records:
        expected_jobs, expected_spend = jobs.apply(expected_jobs, r), spend.apply(expected_spend, r)
    if until is None:
        assert result.states[jobs.name] == expected_jobs and result.states[spend.name] == expected_spend
    with blocks_of(200):
        result = replay(path, [JobsProjection(), MoneyProjection()], until=until)
    assert result.states[jobs.name] == expected_jobs and result.states[spend.name] == expected_spend
    assert result.count == len(records) and result.last_seq == records[-1].seq
    assert sum(result.by_type.values()) == len(records)
    assert (result.first_ts, result.last_ts) == (records[0].ts, records[-1].ts)


def test_replay_until_still_reports_a_bad_line_after_it(tmp_path: Path) -> None:
    lines = lines_of(list(range(N)))
    damaged = bytearray(lines[20])
    damaged[5] ^= 0x02
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join([*lines[:20], bytes(damaged), *lines[21:]]))
    with blocks_of(200), pytest.raises(LogCorrupted) as info:
        replay(path, [JobsProjection()], until=3)
    assert info.value.line_no == 21
