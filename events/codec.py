"""The log line format: one JSON object per line, checksummed, with a versioned, typed body.

A line looks like::

    {"seq":7,"ts":1764500000.25,"type":"job.queued","v":1,"body":{...},"crc":"1c291ca3"}

``crc`` is the CRC-32 of every byte of the line before ``,"crc":`` (the whole envelope and body), so a
flipped byte anywhere in the line is detected. The crc is always 8 hex digits, which puts it at a
fixed offset from the end: verifying it needs no re-encoding. The line stays valid JSON for ``jq``.

Decoding reads the envelope with the body kept raw, checks the crc, then decodes the body straight
into its Struct. A body recorded at an older schema version goes through the registered upcasters.
"""

from __future__ import annotations

import zlib
from typing import Any

import msgspec

from ._base import EventBody, UnknownEventType, event_class, registered_types, upcasters_for
from .record import Recorded

__all__ = ["CorruptRecord", "RecordCodec", "decode_record", "encode_record"]

_SUFFIX_LEN = len(b',"crc":"00000000"}')
_CRC_START = -_SUFFIX_LEN + len(b',"crc":"')


class CorruptRecord(ValueError):
    """A line that is not a valid record: bad JSON, bad checksum, unknown type, or a body that does not fit."""


class _Unsigned(msgspec.Struct, gc=False):
    seq: int
    ts: float
    type: str
    v: int
    body: msgspec.Raw


class _Envelope(msgspec.Struct, gc=False):
    seq: int
    ts: float
    type: str
    v: int
    body: msgspec.Raw
    crc: str


class RecordCodec:
    """Encodes and decodes log lines. Holds per-type decoders so that a replay decodes at full speed."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        self._envelope = msgspec.json.Decoder(_Envelope)
        self._bodies: dict[str, tuple[type[EventBody], msgspec.json.Decoder[Any]]] = {}

    def encode(self, rec: Recorded) -> bytes:
        """One line, newline included."""
        body = msgspec.Raw(self._encoder.encode(rec.event))
        head = self._encoder.encode(_Unsigned(rec.seq, rec.ts, rec.event.type, rec.event.version, body))
        head = head[:-1]  # drop the closing brace; the crc goes last
        return b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head))

    def decode(self, line: bytes) -> Recorded:
        """Decode one line (with or without its newline). Raises :class:`CorruptRecord`."""
        line = line.rstrip(b"\n")
        if len(line) <= _SUFFIX_LEN or not line.endswith(b'"}'):
            raise CorruptRecord("not a record line (truncated or missing checksum)")
        try:
            crc = int(line[_CRC_START:-2], 16)
        except ValueError:
            raise CorruptRecord("checksum field is not 8 hex digits") from None
        if zlib.crc32(line[:-_SUFFIX_LEN]) != crc:
            raise CorruptRecord("checksum mismatch: the line was altered after it was written")
        try:
            env = self._envelope.decode(line)
        except msgspec.DecodeError as exc:
            raise CorruptRecord(f"bad envelope: {exc}") from None
        return Recorded(env.seq, env.ts, self._body(env.type, env.v, env.body))

    def decode_body(self, name: str, raw: msgspec.Raw | bytes, v: int | None = None) -> EventBody:
        """Decode a body of event type ``name`` (current schema version unless ``v`` says otherwise)."""
        cls = self._entry(name)[0]
        return self._body(name, cls.version if v is None else v, msgspec.Raw(raw))

    def _entry(self, name: str) -> tuple[type[EventBody], msgspec.json.Decoder[Any]]:
        entry = self._bodies.get(name)
        if entry is None:
            try:
                cls = event_class(name)
            except UnknownEventType:
                raise CorruptRecord(f"unknown event type {name!r}") from None
            entry = (cls, msgspec.json.Decoder(cls))
            self._bodies[name] = entry
        return entry

    def _body(self, name: str, v: int, raw: msgspec.Raw) -> EventBody:
        cls, decoder = self._entry(name)
        try:
            if v == cls.version:
                body: EventBody = decoder.decode(raw)
                return body
            if v > cls.version:
                raise CorruptRecord(
                    f"{name!r} body is schema version {v}, newer than this code's {cls.version}: upgrade ait"
                )
            data: dict[str, Any] = msgspec.json.decode(raw)
            for fn in upcasters_for(name, v, cls.version):
                data = fn(data)
            return msgspec.convert(data, cls)
        except (msgspec.DecodeError, msgspec.ValidationError, LookupError) as exc:
            raise CorruptRecord(f"{name!r} body (v{v}) does not decode: {exc}") from None


_DEFAULT = RecordCodec()


def encode_record(rec: Recorded) -> bytes:
    return _DEFAULT.encode(rec)


def decode_record(line: bytes) -> Recorded:
    return _DEFAULT.decode(line)


def known_types() -> list[str]:
    return list(registered_types())
