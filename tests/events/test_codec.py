"""The log line format: round trip, checksum over every byte, schema versions and upcasters, unknown types."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import (
    CostSettled,
    EventBody,
    JobProgressed,
    JobQueued,
    PodRequested,
    Recorded,
    RunStarted,
    UnknownEventType,
    _base,
    event,
    event_class,
    upcaster,
)
from events.codec import CorruptRecord, RecordCodec, decode_record, encode_record

texts = st.text(max_size=30)
finite = st.floats(allow_nan=False, allow_infinity=False)

bodies = st.one_of(
    st.builds(
        JobQueued, job_id=texts, episode_id=texts, family=texts, base_model=texts, bundle=texts, time_budget_s=finite
    ),
    st.builds(JobProgressed, job_id=texts, step=st.integers(), reward=st.none() | finite, loss=st.none() | finite),
    st.builds(
        CostSettled, reservation_id=texts, kind=texts, ref=texts, usd=finite, input_tokens=st.integers(0, 10**12)
    ),
    st.builds(PodRequested, key=texts, pod_id=texts, gpu_type=texts, provider=texts),
    st.builds(
        RunStarted,
        run_id=texts,
        seed=st.integers(-(2**63), 2**63 - 1),
        code_version=texts,
        config=st.dictionaries(texts, st.integers() | texts | st.booleans() | st.none(), max_size=4),
    ),
)
records = st.builds(Recorded, st.integers(0, 2**62), finite, bodies)


def _line(seq: int, ts: float, type_: str, v: int, body: bytes) -> bytes:
    """A line built by hand (the format as documented), for versions and types the encoder would not write."""
    head = b'{"seq":%d,"ts":%r,"type":"%s","v":%d,"body":%s' % (seq, ts, type_.encode(), v, body)
    return b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head))


@given(records)
def test_round_trip(rec: Recorded) -> None:
    line = encode_record(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_record(line) == rec
    assert decode_record(line.rstrip(b"\n")) == rec


@given(records)
def test_line_is_plain_json_with_the_documented_envelope(rec: Recorded) -> None:
    obj = msgspec.json.decode(encode_record(rec))
    assert list(obj) == ["seq", "ts", "type", "v", "body", "crc"]
    assert (obj["seq"], obj["type"], obj["v"]) == (rec.seq, rec.event.type, type(rec.event).version)
    assert obj["body"] == msgspec.to_builtins(rec.event)


def test_hand_built_line_matches_the_encoder() -> None:
    rec = Recorded(7, 1.5, JobProgressed(job_id="j", step=3, reward=None, loss=0.25))
    body = msgspec.json.encode(rec.event)
    assert encode_record(rec) == _line(7, 1.5, "job.progressed", 1, body)


@pytest.mark.parametrize("mask", [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF])
def test_a_flipped_byte_anywhere_in_a_line_is_detected(mask: int) -> None:
    rec = Recorded(
        12, 1_764_460_800.125, JobQueued(job_id="job-1", episode_id="ep", family="f", base_model="m", bundle="ab" * 32)
    )
    line = encode_record(rec)
    codec = RecordCodec()
    for i in range(len(line)):
        damaged = bytearray(line)
        damaged[i] ^= mask
        with pytest.raises(CorruptRecord):
            codec.decode(bytes(damaged))


@given(records, st.data())
def test_any_single_byte_change_is_detected(rec: Recorded, data: st.DataObject) -> None:
    line = encode_record(rec)
    i = data.draw(st.integers(0, len(line) - 1))
    new = data.draw(st.integers(0, 255).filter(lambda b: b != line[i]))
    damaged = line[:i] + bytes([new]) + line[i + 1 :]
    with pytest.raises(CorruptRecord):
        decode_record(damaged)


@given(records, st.data())
def test_truncated_lines_are_rejected(rec: Recorded, data: st.DataObject) -> None:
    line = encode_record(rec).rstrip(b"\n")
    cut = data.draw(st.integers(0, len(line) - 1))
    with pytest.raises(CorruptRecord):
        decode_record(line[:cut])


def test_unknown_type_is_an_error() -> None:
    with pytest.raises(UnknownEventType):
        event_class("nope.never_heard_of_it")
    line = _line(0, 1.0, "nope.never_heard_of_it", 1, b"{}")
    with pytest.raises(CorruptRecord, match=r"unknown event type 'nope\.never_heard_of_it'"):
        decode_record(line)


def test_body_that_does_not_fit_its_type_is_an_error() -> None:
    line = _line(0, 1.0, "job.progressed", 1, b'{"job_id":"j","step":"three"}')
    with pytest.raises(CorruptRecord, match=r"'job.progressed' body \(v1\) does not decode"):
        decode_record(line)


def test_envelope_missing_a_field_is_an_error() -> None:
    head = b'{"seq":0,"type":"job.progressed","v":1,"body":{"job_id":"j","step":1}'
    line = b'%s,"crc":"%08x"}' % (head, zlib.crc32(head))
    with pytest.raises(CorruptRecord, match="bad envelope"):
        decode_record(line)


# -- schema versions: a test-only event type at version 3, with upcasters 1 -> 2 -> 3 -----------------


@pytest.fixture
def widget() -> Iterator[type[EventBody]]:
    """Register ``test.widget_made`` (v3) and its upcasters for one test, then take them out of the registry
    again so that other tests see only the real vocabulary."""
    name = "test.widget_made"

    @event(name, version=3)
    class WidgetMade(EventBody, frozen=True, kw_only=True):
        label: str  # v2 renamed ``name`` to ``label``
        size: int  # v3 added ``size``; v1/v2 widgets were all size 1
        tags: list[str] = []

    @upcaster(name, from_version=1)
    def v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
        d["label"] = d.pop("name")
        return d

    @upcaster(name, from_version=2)
    def v2_to_v3(d: dict[str, Any]) -> dict[str, Any]:
        d["size"] = 1
        return d

    try:
        yield WidgetMade
    finally:
        del _base._TYPES[name]
        del _base._UPCASTERS[(name, 1)]
        del _base._UPCASTERS[(name, 2)]


def test_old_schema_versions_are_upcast_through_the_chain(widget: type[Any]) -> None:
    codec = RecordCodec()
    v1 = codec.decode(_line(4, 2.0, "test.widget_made", 1, b'{"name":"cog","tags":["a"]}'))
    v2 = codec.decode(_line(5, 3.0, "test.widget_made", 2, b'{"label":"gear"}'))
    v3 = codec.decode(_line(6, 4.0, "test.widget_made", 3, b'{"label":"big","size":9}'))
    assert v1 == Recorded(4, 2.0, widget(label="cog", size=1, tags=["a"]))
    assert v2 == Recorded(5, 3.0, widget(label="gear", size=1))
    assert v3 == Recorded(6, 4.0, widget(label="big", size=9))
    # New lines are written at the current version and read back unchanged.
    assert codec.encode(v1).count(b'"v":3') == 1
    assert codec.decode(codec.encode(v1)) == v1


def test_upcast_body_is_validated_after_upcasting(widget: type[Any]) -> None:
    with pytest.raises(CorruptRecord, match="does not decode"):
        RecordCodec().decode(_line(0, 1.0, "test.widget_made", 1, b'{"name":5}'))


def test_missing_upcaster_is_an_error(widget: type[Any]) -> None:
    del _base._UPCASTERS[("test.widget_made", 1)]
    try:
        with pytest.raises(CorruptRecord, match=r"no upcaster for 'test\.widget_made' from version 1"):
            RecordCodec().decode(_line(0, 1.0, "test.widget_made", 1, b'{"name":"x"}'))
    finally:
        _base._UPCASTERS[("test.widget_made", 1)] = lambda d: d


def test_newer_schema_than_the_code_is_refused(widget: type[Any]) -> None:
    with pytest.raises(CorruptRecord, match="newer than this code's 3"):
        RecordCodec().decode(_line(0, 1.0, "test.widget_made", 4, b'{"label":"x","size":1}'))


def test_decode_body_defaults_to_the_current_version(widget: type[Any]) -> None:
    codec = RecordCodec()
    assert codec.decode_body("test.widget_made", b'{"label":"x","size":2}') == widget(label="x", size=2)
    assert codec.decode_body("test.widget_made", b'{"name":"x"}', v=1) == widget(label="x", size=1)


def test_registering_a_second_class_under_a_taken_name_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):

        @event("job.queued")
        class Impostor(EventBody, frozen=True, kw_only=True):
            pass


# -- the one-pass block decoder (a replay's hot path) must agree with the line-by-line decoder ------------


@given(st.lists(records, max_size=8), st.binary(max_size=20))
def test_decode_block_equals_line_by_line(recs: list[Recorded], tail: bytes) -> None:
    codec = RecordCodec()
    data = b"".join(codec.encode(r) for r in recs)
    end = len(data)
    block = codec.decode_block(data + tail.replace(b"\n", b""), end)
    assert block == [codec.decode(line) for line in data.splitlines()]
    # A replay's blocks: the envelopes themselves, with the same seq, ts and event as the records.
    envelopes = codec.decode_block(data + tail.replace(b"\n", b""), end, records=False)
    assert envelopes is not None and block is not None
    assert [(e.seq, e.ts, e.event) for e in envelopes] == [(r.seq, r.ts, r.event) for r in block]
    assert all(type(e) is not Recorded for e in envelopes)


def test_decode_block_refuses_every_single_byte_change() -> None:
    codec = RecordCodec()
    recs = [
        Recorded(0, 1.0, JobQueued(job_id="a", episode_id="e", family="f", base_model="m", bundle="b")),
        Recorded(1, 2.0, PodRequested(key="r:1", pod_id="p", gpu_type="g", provider="local")),
        Recorded(2, 3.0, JobProgressed(job_id="a", step=1, reward=None, loss=0.5)),
    ]
    data = b"".join(codec.encode(r) for r in recs)
    assert codec.decode_block(data, len(data)) == recs
    for i in range(len(data)):
        for mask in (0x01, 0x20, 0x80):
            damaged = bytearray(data)
            damaged[i] ^= mask
            if damaged[-1] != ord("\n"):
                continue  # the caller only hands over whole lines
            assert codec.decode_block(bytes(damaged), len(damaged)) is None, (i, mask)
            assert codec.decode_block(bytes(damaged), len(damaged), records=False) is None, (i, mask)


def test_decode_block_leaves_old_versions_to_the_careful_path(widget: type[Any]) -> None:
    codec = RecordCodec()
    current = codec.encode(Recorded(0, 1.0, widget(label="new", size=2)))
    old = _line(1, 2.0, "test.widget_made", 1, b'{"name":"old"}')
    assert codec.decode_block(current, len(current)) == [Recorded(0, 1.0, widget(label="new", size=2))]
    assert codec.decode_block(current + old, len(current + old)) is None
    assert codec.decode(old) == Recorded(1, 2.0, widget(label="old", size=1))


def test_decode_block_checks_seq_when_asked() -> None:
    codec = RecordCodec()
    recs = [Recorded(s, 1.0, JobProgressed(job_id="j", step=s)) for s in (5, 6, 8)]
    data = b"".join(codec.encode(r) for r in recs)
    assert codec.decode_block(data, len(data)) == recs  # no seq expectation: decoded as they are
    assert codec.decode_block(data, len(data), first_seq=5) is None  # 8 where 7 was expected
    two = len(codec.encode(recs[0])) + len(codec.encode(recs[1]))
    assert codec.decode_block(data, two, first_seq=5) == recs[:2]
