"""A small deterministic TOML writer for generated configs (the stdlib reads TOML but cannot write it).

Output is stable byte for byte (keys in insertion order, fixed float formatting), which is what the
golden-config tests compare. Supported values: str, bool, int, float (finite), lists of scalars,
nested tables and arrays of tables (a list of dicts). ``tomllib.loads(dumps(d)) == d`` holds for every
supported ``d`` (a property test checks it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TomlWriteError", "dumps"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class TomlWriteError(ValueError):
    """A value that has no TOML form here (None, NaN, a set, ...); names the key path."""


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes, except that TOML forbids DEL unescaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _scalar(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TomlWriteError(f"{path}: {value} has no TOML form here")
        return repr(value)  # shortest round-trip form, e.g. 3e-06, 1.0
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple) and not any(isinstance(v, Mapping) for v in value):
        return "[" + ", ".join(_scalar(v, f"{path}[{i}]") for i, v in enumerate(value)) + "]"
    raise TomlWriteError(f"{path}: cannot write a {type(value).__name__} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _emit(table: Mapping[str, Any], path: list[str], out: list[str], header: str | None) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping) and not _is_table_array(v)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    arrays = [(k, v) for k, v in table.items() if _is_table_array(v)]
    # A table header is needed when the table holds scalars, or is empty (so that it exists at all).
    if header is not None and (scalars or not table or header.startswith("[[")):
        if out:
            out.append("")
        out.append(header)
    for key, value in scalars:
        out.append(f"{_key(key)} = {_scalar(value, '.'.join([*path, key]))}")
    for key, value in tables:
        sub = [*path, key]
        _emit(value, sub, out, "[" + ".".join(_key(k) for k in sub) + "]")
    for key, items in arrays:
        sub = [*path, key]
        for item in items:
            _emit(item, sub, out, "[[" + ".".join(_key(k) for k in sub) + "]]")


def dumps(data: Mapping[str, Any], *, header_comment: Sequence[str] = ()) -> str:
    """``data`` as TOML text, preceded by ``# `` comment lines."""
    out: list[str] = []
    _emit(data, [], out, None)
    comments = [f"# {line}".rstrip() for line in header_comment]
    if comments and out:
        comments.append("")
    return "\n".join([*comments, *out]) + "\n"
