"""Reading a TOML file a person or an agent wrote, with errors that name the file, the line and the field.

- :func:`decode_toml` turns bytes into a document; a byte that is not UTF-8 and a TOML syntax error both
  become one line naming ``file:line`` (a raw ``UnicodeDecodeError`` names neither);
- :func:`key_line` finds the line where a key (``["fleet", "max_pods"]``) is set, so a type error that a
  validator reports by field (msgspec's ``at `$.fleet.max_pods```) can name the line too;
- :func:`field_error` turns a :class:`msgspec.ValidationError` into ``file:line: [table].key: reason``.

Types are strict everywhere these are used: a quoted number (``"12"``) is a string, never coerced.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from typing import Any

import msgspec

__all__ = ["TomlError", "decode_toml", "field_error", "key_line"]


class TomlError(ValueError):
    """A TOML file that cannot be read as a document; the message is one line naming the file and line."""


_AT = re.compile(r"^(?P<why>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?P<key>"[^"]*"|'[^']*'|[A-Za-z0-9_.\- "']+?)\s*=""")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def decode_toml(data: bytes, source: str) -> dict[str, Any]:
    """Parse ``data`` (the bytes of ``source``): UTF-8 TOML, or :class:`TomlError` naming the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = data[exc.start : exc.end].hex(" ")
        raise TomlError(f"{source}:{line}: not UTF-8 text (byte(s) {bad} at column {col})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        at = m.group(1) if m else str(text.count("\n") + 1) if "end of document" in str(exc) else ""
        where = f"{source}:{at}" if at else source
        raise TomlError(f"{where}: not valid TOML: {_one_line(str(exc))}") from None


_PART = re.compile(r"""\s*("[^"]*"|'[^']*'|[^."'\s]+)\s*(?:\.|$)""")


def _dotted(name: str) -> tuple[str, ...]:
    """``a."b.c".d`` -> ``("a", "b.c", "d")``: dots inside quotes belong to the key."""
    return tuple(m.group(1).strip("\"'") for m in _PART.finditer(name))


def key_line(text: str, path: Sequence[str]) -> int | None:
    """The 1-based line that sets ``path`` (tables then key), or None where it is not written plainly."""
    want = tuple(path)
    table: tuple[str, ...] = ()
    for no, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = _dotted(header.group("name"))
            if table == want:
                return no
            continue
        key = _KEY.match(line)
        if key:
            full = table + _dotted(key.group("key"))
            if full == want or (len(full) < len(want) and want[: len(full)] == full):
                return no  # the key itself, or the inline table / array that holds the field
    return None


def field_error(exc: msgspec.ValidationError | ValueError, text: str, source: str, prefix: Sequence[str] = ()) -> str:
    """``source:line: [table].key: reason`` for a validation error at ``$.<path>`` under the tables ``prefix``."""
    m = _AT.match(str(exc))
    why = _one_line(m.group("why") if m else str(exc))
    raw = (m.group("path") or "") if m else ""
    path = [*prefix, *(p for p in re.split(r"\.|\[\d+\]", raw) if p)]
    named = re.search(r"(?:unknown|missing required) field `([^`]+)`", why)
    if named:  # the field is the one the message names, inside the table at ``path``
        path.append(named.group(1))
    line = None
    for depth in range(len(path), 0, -1):  # the key's own line, else its table's (a missing key has none)
        line = key_line(text, path[:depth])
        if line:
            break
    where = f"{source}:{line}" if line else source
    if not path:
        return f"{where}: {why}"
    field = f"[{'.'.join(path[:-1])}].{path[-1]}" if len(path) > 1 else path[0]
    return f"{where}: {field}: {why}"
