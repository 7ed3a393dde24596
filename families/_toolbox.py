"""The tools of one task, by name, callable the way a model calls them (name + JSON arguments).

``ToolBox.call`` never raises for a model mistake: an unknown tool, bad arguments or a rejected
request (a tool raising :class:`ToolError`) come back as ``"error: ..."`` strings, which is what the
model sees in an episode. Bugs in a tool (any other exception) do raise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ._schema import ArgumentError, parse_arguments, tool_schema

__all__ = ["ToolBox", "ToolError"]


class ToolError(Exception):
    """A tool rejected a request (unknown account, insufficient funds...); the model sees the message."""


class ToolBox:
    """Named tool functions bound to one task; each returns a short string."""

    def __init__(self, tools: Iterable[Callable[..., str]]) -> None:
        fns: dict[str, Callable[..., str]] = {}
        for fn in tools:
            if fn.__name__ in fns:
                raise ValueError(f"duplicate tool name {fn.__name__!r}")
            fns[fn.__name__] = fn
        self._fns = MappingProxyType(fns)

    def functions(self) -> Mapping[str, Callable[..., str]]:
        return self._fns

    def schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(fn) for fn in self._fns.values()]

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call as a model would; model errors come back as ``"error: ..."``."""
        fn = self._fns.get(name)
        if fn is None:
            return f"error: unknown tool {name!r}; available: {', '.join(self._fns)}"
        try:
            return str(fn(**parse_arguments(fn, arguments)))
        except (ArgumentError, ToolError) as exc:
            return f"error: {exc}"
