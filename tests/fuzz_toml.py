"""Mutations of a valid TOML file for the config fuzzers (run config, job.toml), each with what it must cause.

Targeted mutations are wrong by construction, so the loader must refuse them with one line naming the file,
the mutated line and the key: a quoted number (``max_pods = "2"``), a value of another TOML type, an unknown
key, a byte that is not UTF-8. Blind mutations (byte flips, dropped or doubled lines) may happen to stay
valid: they must be either accepted or refused with one line naming the file, never a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzzing import record

__all__ = ["Mutant", "check_refusal", "check_silence", "toml_mutants"]

_KEY_LINE = re.compile(r"""^(?P<key>[A-Za-z0-9_\-]+|"[^"]*")\s*=\s*(?P<value>.+?)\s*(?:#.*)?$""")
_HEADER = re.compile(r"^\[(?P<name>[^\]]+)\]\s*(?:#.*)?$")
_NUMBER = re.compile(r"^[+-]?(\d[\d_]*(\.\d+)?([eE][+-]?\d+)?|inf|nan)$")


@dataclass(frozen=True)
class Mutant:
    data: bytes
    kind: str
    line: int = 0  # 1-based line a targeted mutation changed (0: a blind mutation)
    key: str = ""  # the key it changed, as an error must name it
    must_fail: bool = False


@dataclass(frozen=True)
class _Slot:
    line: int
    table: str
    key: str
    value: str


def _slots(text: str) -> list[_Slot]:
    table = ""
    out: list[_Slot] = []
    for no, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line.strip())
        if header:
            table = header.group("name").strip()
            continue
        m = _KEY_LINE.match(line.strip())
        if m and table:
            out.append(_Slot(no, table, m.group("key").strip('"'), m.group("value")))
    return out


def _kind_of(value: str) -> str:
    if _NUMBER.match(value):
        return "number"
    if value in ("true", "false"):
        return "bool"
    return {"'": "string", '"': "string", "[": "array", "{": "table"}.get(value[:1], "other")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_\-]+", key) else f'"{key}"'


def _replace_line(text: str, no: int, new: str) -> str:
    lines = text.split("\n")
    lines[no - 1] = new
    return "\n".join(lines)


_OTHER_TYPE = {
    "number": ['"text"', "true", "[1, 2]", "{ a = 1 }"],
    "string": ["12", "true", '["a"]', "{ a = 1 }", "1979-05-27"],
    "bool": ['"yes"', "1", "[true]"],
    "array": ['"a"', "3", "{ a = 1 }"],
    "table": ['"a"', "3", "[1]"],
}


@st.composite
def toml_mutants(draw: st.DrawFn, base: str, open_tables: tuple[str, ...] = ()) -> Mutant:
    """A mutation of ``base``. ``open_tables`` (name prefixes) take any key: no unknown key is put there."""
    slots = _slots(base)
    kind = draw(st.sampled_from(["quote_number", "other_type", "unknown_key", "non_utf8", "blind"]))
    if kind == "quote_number":
        numbers = [s for s in slots if _kind_of(s.value) == "number"]
        if numbers:
            s = draw(st.sampled_from(numbers))
            text = _replace_line(base, s.line, f'{_key(s.key)} = "{s.value}"')
            return Mutant(text.encode(), kind, s.line, s.key, must_fail=True)
        kind = "other_type"
    if kind == "other_type":
        s = draw(st.sampled_from(slots))
        value = draw(st.sampled_from(_OTHER_TYPE.get(_kind_of(s.value), ['"a"'])))
        text = _replace_line(base, s.line, f"{_key(s.key)} = {value}")
        return Mutant(text.encode(), kind, s.line, s.key, must_fail=True)
    lines = base.split("\n")
    if kind == "unknown_key":
        headers = [
            i
            for i, line in enumerate(lines)
            if (m := _HEADER.match(line.strip())) and not m.group("name").startswith(open_tables)
        ]
        at = draw(st.sampled_from(headers)) + 1
        name = draw(st.sampled_from(["zzz_unknown", "max_podz", "learning_rat", "typo_key"]))
        lines.insert(at, f"{name} = 1")
        return Mutant("\n".join(lines).encode(), kind, at + 1, name, must_fail=True)
    if kind == "non_utf8":
        no = draw(st.integers(1, len(lines)))
        raw = [line.encode() for line in lines]
        col = draw(st.integers(0, len(raw[no - 1])))
        bad = draw(st.sampled_from([b"\xff", b"\xfe", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xe9"]))
        raw[no - 1] = raw[no - 1][:col] + bad + raw[no - 1][col:]
        return Mutant(b"\n".join(raw), kind, no, "", must_fail=True)
    data = bytearray(base.encode())
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "drop_line", "dup_line", "insert"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.sampled_from([b'"', b"=", b"[", b"]", b"\n", b"#", b"'", b"0", b"-", b"\\"]))
        else:
            parts = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(parts) - 1))
            if op == "drop_line":
                del parts[i]
            else:
                parts.insert(i, parts[i])
            data = bytearray(b"\n".join(parts))
    return Mutant(bytes(data), "blind")


def check_refusal(m: Mutant, path: Path, msg: str) -> None:
    """A clean refusal: one line that names the file, and for a targeted mutation its line and key."""
    assert "\n" not in msg and msg.startswith(f"{path}"), msg
    if m.must_fail:
        assert msg.startswith(f"{path}:{m.line}: "), f"{m.kind}: the error names no line {m.line}: {msg}"
        assert m.key in msg if m.key else "not UTF-8" in msg, f"{m.kind}: the error names no {m.key!r}: {msg}"


def check_silence(m: Mutant, surface: str) -> None:
    """Accepted without complaint: fine for a valid mutation, a failure (tallied) for one that must fail."""
    if m.must_fail:
        record(surface, "silent_accept", m.kind)
        raise AssertionError(f"{m.kind} at line {m.line} ({m.key!r}) accepted without complaint")
