"""JSON tool schemas derived from typed Python functions, and argument checking against them.

A tool is a plain function whose parameters are annotated with ``int``, ``float``, ``str``, ``bool``,
``list[...]`` or ``Literal[...]`` and whose docstring is a summary followed by an optional ``Args:``
section (``name: what it is`` per line). The schema is the OpenAI function-tool format
``{"type": "function", "function": {"name", "description", "parameters"}}``.

Argument checking mirrors what the hidden eval's tool server (pydantic, lax mode) accepts, so the
in-process tools and the served tools agree on which calls are valid: integers may arrive as integral
floats or numeric strings; nothing else is coerced.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ArgumentError", "parse_arguments", "tool_schema"]

_INT_RE = re.compile(r"^[+-]?\d+$")


class ArgumentError(ValueError):
    """The arguments of a tool call do not fit the tool's signature; the message is model-facing."""


def _type_schema(tp: Any, where: str) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if origin is list:
        (item,) = typing.get_args(tp)
        return {"type": "array", "items": _type_schema(item, where)}
    if origin is typing.Literal:
        values = list(typing.get_args(tp))
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"{where}: only string Literal values are supported")
        return {"type": "string", "enum": values}
    raise TypeError(f"{where}: unsupported tool parameter type {tp!r}")


def _split_doc(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google-style docstring."""
    doc = inspect.getdoc(fn)
    if not doc:
        raise TypeError(f"tool {fn.__name__}: a docstring is required (it is the model-facing description)")
    summary, _, args_block = doc.partition("\nArgs:")
    params: dict[str, str] = {}
    current = ""
    for line in args_block.splitlines():
        match = re.match(r"^\s+(\w+):\s*(.*)$", line)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    return " ".join(summary.split()), params


def _params(fn: Callable[..., Any]) -> list[tuple[inspect.Parameter, Any]]:
    hints = typing.get_type_hints(fn, include_extras=False)
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"tool {fn.__name__}: parameter {p.name} must be a plain named parameter")
        if p.name not in hints:
            raise TypeError(f"tool {fn.__name__}: parameter {p.name} needs a type annotation")
        out.append((p, hints[p.name]))
    return out


def tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI function-tool schema of ``fn``."""
    summary, docs = _split_doc(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for p, tp in _params(fn):
        prop = _type_schema(tp, f"tool {fn.__name__}: parameter {p.name}")
        if p.name in docs:
            prop["description"] = docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        else:
            prop["default"] = p.default
        properties[p.name] = prop
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": fn.__name__, "description": summary, "parameters": parameters}}


def _coerce(value: Any, tp: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_RE.match(value.strip()):
            return int(value.strip())
        raise ArgumentError(f"argument {name!r} must be an integer, got {value!r}")
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin is list:
        if isinstance(value, list):
            (item,) = typing.get_args(tp)
            return [_coerce(v, item, f"{name}[{i}]") for i, v in enumerate(value)]
    elif origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        choices = ", ".join(repr(v) for v in typing.get_args(tp))
        raise ArgumentError(f"argument {name!r} must be one of {choices}, got {value!r}")
    _fail(name, _type_schema(tp, name)["type"], value)


def _fail(name: str, expected: str, value: Any) -> typing.NoReturn:
    raise ArgumentError(f"argument {name!r} must be {expected}, got {value!r}")


def parse_arguments(fn: Callable[..., Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``arguments`` against ``fn``'s signature; return them coerced, or raise ArgumentError."""
    params = _params(fn)
    known = {p.name for p, _ in params}
    extra = sorted(set(arguments) - known)
    if extra:
        raise ArgumentError(f"unexpected argument(s) {', '.join(map(repr, extra))} for {fn.__name__}")
    out: dict[str, Any] = {}
    for p, tp in params:
        if p.name in arguments:
            out[p.name] = _coerce(arguments[p.name], tp, p.name)
        elif p.default is inspect.Parameter.empty:
            raise ArgumentError(f"missing argument {p.name!r} for {fn.__name__}")
    return out
