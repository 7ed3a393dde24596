"""The log line format: one JSON object per line, checksummed, with a versioned, typed body.

A line looks like::

    {"seq":7,"ts":1764500000.25,"type":"job.queued","v":1,"body":{...},"crc":"1c291ca3"}

``crc`` is the CRC-32 of every byte of the line before ``,"crc":`` (the whole envelope and body), so a
flipped byte anywhere in the line is detected. The crc is always 8 hex digits, which puts it at a
fixed offset from the end: verifying it needs no re-encoding. The line stays valid JSON for ``jq``.

Decoding checks the crc, then decodes envelope and body in one pass: the envelope's ``type`` is the tag
of a union of one envelope Struct per registered event type, whose ``body`` is that type's Struct.
:meth:`RecordCodec.decode_block` does this for a whole buffer of lines in one ``decode_lines`` call (a
replay's hot path). Anything that pass does not take (an older schema version, an unknown type, a bad
line) goes the careful way: the envelope with the body kept raw, upcasters, and a precise error.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, getitem
from struct import pack as _pack
from typing import Any, Literal, Union, cast

import msgspec

from ._base import _TYPES, EventBody, UnknownEventType, event_class, registered_types, upcasters_for
from .record import Recorded

__all__ = ["CorruptRecord", "RecordCodec", "decode_record", "encode_record", "envelope_type"]

_SUFFIX_TEMPLATE = b',"crc":"00000000"}'
_SUFFIX_LEN = len(_SUFFIX_TEMPLATE)
_CRC_KEY = b',"crc":"'
_HEX_AT = len(_CRC_KEY)  # where the crc's hex digits start in the suffix
_CRC_START = -_SUFFIX_LEN + _HEX_AT
_HEAD, _SUFFIX = slice(0, -_SUFFIX_LEN), slice(-_SUFFIX_LEN, None)
_seq, _ts, _event = attrgetter("seq"), attrgetter("ts"), attrgetter("event")
_slice = cast("Callable[[bytes, slice[int, int, None]], bytes]", getitem)


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


def _typed_envelope(name: str, cls: type[EventBody]) -> type[msgspec.Struct]:
    """The envelope of one event type, tagged by its ``type``, with the body decoded as ``cls``. Only the
    current schema version fits (``v`` is a literal): an older one is the careful path's to upcast."""
    # The body is the attribute ``event`` (``body`` on the wire), so that an envelope reads like a Recorded
    # (``seq``, ``ts``, ``event``): a replay folds the envelopes themselves (``decode_block(records=False)``).
    body: tuple[str, Any, Any] = ("event", cls, msgspec.field(name="body"))
    # No ``crc`` field: every caller checks the line's last 18 bytes as text first (``,"crc":"`` + the 8 hex
    # digits of the crc of all before them + ``"}``), so the decoder skips the value instead of making a str
    # per line that nothing reads (~200 instructions of a replay's ~22,500 per event: benchmarks/replay_instr.py).
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("seq", int),
        ("ts", float),
        ("v", Literal[cls.version]),
        body,
    ]
    return msgspec.defstruct(f"Envelope[{name}]", fields, tag_field="type", tag=name, gc=False)


def envelope_type(cls: type[Any]) -> str:
    """The event type name of a typed envelope class (what ``decode_block(records=False)`` hands out)."""
    name: str = cls.__struct_config__.tag
    return name


# The one-pass decoder over every registered type, shared by all codecs (building it costs milliseconds,
# and every log open makes a codec); rebuilt when a type has been registered (or removed) since.
_typed: tuple[int, msgspec.json.Decoder[Any]] | None = None


def _typed_decoder() -> msgspec.json.Decoder[Any]:
    global _typed
    if _typed is None or _typed[0] != len(_TYPES):
        union = tuple(_typed_envelope(name, cls) for name, cls in sorted(_TYPES.items()))
        _typed = (len(_TYPES), msgspec.json.Decoder(Union[union] if union else msgspec.Raw))  # noqa: UP007
    return _typed[1]


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
        if len(line) <= _SUFFIX_LEN or not line.endswith(b'"}') or line[-_SUFFIX_LEN:_CRC_START] != _CRC_KEY:
            raise CorruptRecord("not a record line (truncated or missing checksum)")
        # Compare the text, not int(text, 16): int() also accepts "A" for "a", so a flipped case bit in
        # the checksum itself would go unnoticed.
        if line[_CRC_START:-2] != b"%08x" % zlib.crc32(line[:-_SUFFIX_LEN]):
            raise CorruptRecord("checksum mismatch: the line was altered after it was written")
        try:
            typed = _typed_decoder().decode(line)
        except msgspec.DecodeError:
            pass  # the careful path below says what is wrong, or upcasts, or knows a type registered since
        else:
            return Recorded(typed.seq, typed.ts, typed.event)
        try:
            env = self._envelope.decode(line)
        except msgspec.DecodeError as exc:
            raise CorruptRecord(f"bad envelope: {exc}") from None
        return Recorded(env.seq, env.ts, self._body(env.type, env.v, env.body))

    def decode_block(
        self, data: bytes, end: int, first_seq: int | None = None, start: int = 0, *, records: bool = True
    ) -> list[Recorded] | None:
        """Decode the whole lines in ``data[start:end]`` (``end`` just past a newline) in one pass.

        Returns None unless every line is a valid record at its type's current schema version (and, with
        ``first_seq``, the seqs run on from it without a gap): the caller then decodes line by line,
        which upcasts old versions or reports the first bad line.

        ``records=False``: the decoded envelopes themselves, checked the same way, instead of a
        :class:`Recorded` made for each. An envelope has the same ``seq``, ``ts`` and ``event`` attributes
        (read them, nothing else: it is no Recorded for ``==``, ``isinstance`` or encoding); a replay folds
        them as they are and saves a Recorded per line (benchmarks/log_bench.py).
        """
        if end <= start:
            return []
        try:
            envs = _typed_decoder().decode_lines(memoryview(data)[start:end])
        except msgspec.DecodeError:
            return None
        lines = data[start : end - 1].split(b"\n")
        n = len(lines)
        if len(envs) != n:  # decode_lines skips blank lines; a blank line is bad
            return None
        # The crc check, as in decode(), for the whole block at once: a replay's hot path, and Python pays
        # per call and per object, not per byte. Each line must end with exactly ',"crc":"', the lowercase
        # hex of the CRC-32 of all before it, and '"}'. The crcs are computed line by line (one C call
        # each), turned into hex in one call, and spliced into the expected suffixes column by column; then
        # the block's actual suffixes are compared with those in one comparison. (Every line decoded as an
        # envelope, so it is longer than the suffix; a shorter one would make the lengths differ.)
        crcs = _pack(f">{n}I", *map(zlib.crc32, map(_slice, lines, repeat(_HEAD))))
        hexes = crcs.hex().encode()
        expected = bytearray(_SUFFIX_TEMPLATE * n)
        for k in range(8):
            expected[_HEX_AT + k :: _SUFFIX_LEN] = hexes[k::8]
        if b"".join(map(_slice, lines, repeat(_SUFFIX))) != expected:
            return None
        seqs = list(map(_seq, envs))
        if first_seq is not None and seqs != list(range(first_seq, first_seq + n)):
            return None
        if not records:
            return cast("list[Recorded]", envs)
        return list(map(Recorded, seqs, map(_ts, envs), map(_event, envs)))

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
