"""A verifiers ``Toolset`` served in process: the same MCP tool objects, no server process, no HTTP.

Under ``vf-eval`` every toolset runs as an MCP streamable-HTTP server in its own Python process and the
null harness reaches it over HTTP (~5-13 CPU-s of process start-up per rollout). Here the toolset's
own ``register(mcp)`` fills an in-memory ``mcp`` ``MCPServer`` and calls go straight to its
``call_tool``: the argument validation, the result-to-content conversion and the error text
(``Error executing tool add: ...``) are mcp's own, so a tool answers exactly what it answers when
served.

Per-rollout state: a served tool pulls the calling rollout's ``trace.state`` over the state channel
before the call and pushes it back after (a JSON round trip, validated into the toolset's and then the
task's ``State`` type). Here the two channel methods of the toolset instance are replaced by ones that
read and write the trace of the rollout whose call is running (a context variable, so concurrent
rollouts sharing one toolset never see each other's state); the JSON round trip is kept.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import structlog
from pydantic import TypeAdapter
from verifiers import __version__ as vf_version  # type: ignore[import-untyped]
from verifiers.v1.errors import HarnessError  # type: ignore[import-untyped]
from verifiers.v1.harnesses.utils.mcp import mcp_content_to_chat_content  # type: ignore[import-untyped]

__all__ = ["InprocToolset", "ToolRouter"]

log = structlog.get_logger(__name__)

# The trace of the rollout whose tool call is running (None outside a call).
_CALLER: contextvars.ContextVar[Any] = contextvars.ContextVar("inproc_tool_caller", default=None)


def _error_content(exc: BaseException) -> list[Any]:
    """What mcp's server answers for a failed call: the error text as one text block."""
    from mcp.types import TextContent

    return [TextContent(type="text", text=str(exc))]


class InprocToolset:
    """One ``vf.Toolset`` instance with its tools registered on an in-memory MCP server."""

    def __init__(self, toolset: Any) -> None:
        self.toolset = toolset
        self.name: str = toolset.server_name
        self._stack = AsyncExitStack()
        self._mcp: Any = None
        self._schemas: list[dict[str, Any]] = []
        self._raw_names: dict[str, str] = {}  # model-facing name -> tool name on this server
        # Replace the HTTP state channel with the calling rollout's trace (see the module doc).
        toolset._pull_state = self._pull_state
        toolset._push_state = self._push_state

    async def start(self, task_data: Any = None) -> None:
        """``setup()`` (and ``setup_task(task_data)`` for a per-rollout toolset), then register its tools."""
        from mcp.server.mcpserver import MCPServer

        # A toolset may push clean-ups onto its own exit stack in setup(); served, that stack wraps the server.
        await self._stack.enter_async_context(self.toolset._exit_stack)
        await self.toolset.setup()
        if task_data is not None:
            await self.toolset.setup_task(task_data)
        self._mcp = MCPServer(self.name or type(self.toolset).__name__, version=vf_version)
        self.toolset.register(self._mcp)
        for tool in await self._mcp.list_tools():
            # The null harness names a tool ``<server>_<tool>`` unless the server's prefix is empty.
            full = f"{self.name}_{tool.name}" if self.name else tool.name
            self._raw_names[full] = tool.name
            self._schemas.append(
                {
                    "type": "function",
                    "function": {"name": full, "description": tool.description or "", "parameters": tool.input_schema},
                }
            )

    async def close(self) -> None:
        await self._stack.aclose()

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return list(self._schemas)

    @property
    def names(self) -> list[str]:
        return list(self._raw_names)

    async def call(self, name: str, arguments: dict[str, Any], trace: Any) -> str | list[dict[str, Any]]:
        """Run tool ``name`` (model-facing name) for the rollout of ``trace``; returns the tool message content."""
        if self._mcp is None:
            raise RuntimeError(f"toolset {self.name!r} is not started")
        token = _CALLER.set(trace)
        try:
            try:
                result = await self._mcp.call_tool(self._raw_names[name], arguments)
                content = result.content
            except Exception as exc:  # mcp's server turns any failed call into an error result, so do we
                content = _error_content(exc)
        finally:
            _CALLER.reset(token)
        converted: str | list[dict[str, Any]] = mcp_content_to_chat_content(content)
        return converted

    async def _pull_state(self) -> Any:
        trace = _CALLER.get()
        if trace is None:
            return self.toolset._state_cls()
        wire = TypeAdapter(type(trace.state)).dump_json(trace.state)
        return self.toolset._state_adapter.validate_json(wire)

    async def _push_state(self, before: bytes) -> None:
        trace = _CALLER.get()
        if trace is None:
            return
        after = self.toolset._state_adapter.dump_json(self.toolset.state)
        if after == before:
            return
        trace.state = TypeAdapter(type(trace.state)).validate_json(after)


class ToolRouter:
    """The tools one rollout sees: its shared (taskset-scoped) and per-rollout (task-scoped) toolsets."""

    def __init__(self, toolsets: Sequence[InprocToolset]) -> None:
        self._by_name: dict[str, InprocToolset] = {}
        self.schemas: list[dict[str, Any]] = []
        for server in toolsets:
            for schema, name in zip(server.schemas, server.names, strict=True):
                if name in self._by_name:
                    # connect_mcp refuses the same inside the harness program, which then dies: a harness error.
                    raise HarnessError(f"duplicate tool name {name!r}; keep MCP tool names qualified")
                self._by_name[name] = server
                self.schemas.append(schema)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    async def call(self, name: str, arguments: dict[str, Any], trace: Any) -> str | list[dict[str, Any]]:
        return await self._by_name[name].call(name, arguments, trace)
