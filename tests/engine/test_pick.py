"""engine.pick: the records a needle finds are exactly those a full read filters, and bad lines are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.log import LogCorrupted, read_log
from engine.pick import first_record, needle_of_field, needle_of_type, pick_records
from events import CostSettled, EpisodeFinished, JobSucceeded, Recorded, RunStarted
from events.codec import RecordCodec
from tests.golden.make_run_log import OUT

GOLDEN = OUT / "events.jsonl"


def test_picked_records_are_the_full_reads_records_of_those_types() -> None:
    records = read_log(GOLDEN).records
    for types in [(CostSettled,), (EpisodeFinished, JobSucceeded)]:
        want = [r for r in records if isinstance(r.event, types)]
        assert want, types  # the golden run has some: the comparison is not vacuous
        got = pick_records(GOLDEN, [needle_of_type(t) for t in types], lambda r, t=types: isinstance(r.event, t))
        assert got == want


def test_picked_by_field_and_first_record() -> None:
    records = read_log(GOLDEN).records
    eid = next(r.event.episode_id for r in records if isinstance(r.event, EpisodeFinished))
    want = [r for r in records if getattr(r.event, "episode_id", None) == eid]
    got = pick_records(GOLDEN, [needle_of_field("episode_id", eid)], lambda r: r.event.episode_id == eid)  # type: ignore[attr-defined]
    assert len(want) > 1 and got == want
    assert first_record(GOLDEN) == records[0]


def _write(path: Path, bodies: list[object], tail: bytes = b"") -> list[bytes]:
    codec = RecordCodec()
    lines = [codec.encode(Recorded(i, 1.0 + i, b)) for i, b in enumerate(bodies)]  # type: ignore[arg-type]
    path.write_bytes(b"".join(lines) + tail)
    return lines


def test_a_needle_in_another_field_is_dropped_by_keep_and_a_torn_tail_is_no_record(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    decoy = RunStarted(run_id="r", seed=1, code_version="x", config={"type": "cost.settled"})
    cost = CostSettled(reservation_id="r-1", kind="job", ref="j", usd=0.5, seconds=1.0)
    _write(log, [decoy, cost], tail=b'{"seq":2,"ts":3.0,"type":"cost.settled","v":1,"bo')
    needle = needle_of_type(CostSettled)
    assert log.read_bytes().count(needle) == 3  # the decoy's config and the torn tail hold it too
    hits: list[Recorded] = []
    got = pick_records(log, [needle], lambda r: hits.append(r) or isinstance(r.event, CostSettled))
    assert [r.seq for r in hits] == [0, 1] and [r.seq for r in got] == [1]


def test_a_corrupt_line_that_holds_a_needle_is_refused_with_its_line_number(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    cost = CostSettled(reservation_id="r-1", kind="job", ref="j", usd=0.5, seconds=1.0)
    lines = _write(log, [cost, cost, cost])
    assert pick_records(log, [needle_of_type(CostSettled)], lambda r: True)  # the intact log reads
    log.write_bytes(lines[0] + lines[1].replace(b"0.5", b"0.7") + lines[2])
    with pytest.raises(LogCorrupted, match=r"events.jsonl:2: checksum mismatch"):
        pick_records(log, [needle_of_type(CostSettled)], lambda r: True)
    log.write_bytes(lines[0].replace(b"0.5", b"0.7"))
    with pytest.raises(LogCorrupted, match=r"events.jsonl:1: "):
        first_record(log)


def test_first_record_of_an_empty_or_torn_log_is_none(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"")
    assert first_record(log) is None
    log.write_bytes(b'{"seq":0,"ts":1.0')
    assert first_record(log) is None
