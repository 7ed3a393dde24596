"""The trainer agent's tools: JSON-schema definitions and their execution against the workspace.

A malformed call (unknown tool, arguments that are not a JSON object, a missing or mistyped argument)
and every refused file operation come back as a tool result the agent can read, never as an exception
that ends the episode. ``submit_job`` is only recognised here; the episode loop runs the probe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from handlers.episode.workspace import Workspace, WorkspaceError
from handlers.ports.policy import ToolCall

__all__ = ["SUBMIT_JOB", "TOOL_SCHEMAS", "ToolOutcome", "parse_arguments", "run_tool"]

SUBMIT_JOB = "submit_job"


def _fn(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required, "additionalProperties": False},
        },
    }


_PATH = {"type": "string", "description": "path relative to the workspace root, e.g. 'env/taskset.py'"}

TOOL_SCHEMAS: list[dict[str, Any]] = [
    _fn("read_file", "Read a UTF-8 text file from the workspace.", {"path": _PATH}, ["path"]),
    _fn(
        "write_file",
        "Create or overwrite a workspace file with the given content.",
        {"path": _PATH, "content": {"type": "string", "description": "the whole new file content"}},
        ["path", "content"],
    ),
    _fn(
        "edit_file",
        "Replace exactly one occurrence of old_text with new_text in a workspace file.",
        {
            "path": _PATH,
            "old_text": {"type": "string", "description": "text to find; must occur exactly once"},
            "new_text": {"type": "string", "description": "replacement text"},
        },
        ["path", "old_text", "new_text"],
    ),
    _fn(
        "list_files",
        "List the files in the workspace (or under a directory of it).",
        {"directory": {"type": "string", "description": "optional directory relative to the root"}},
        [],
    ),
    _fn(
        "get_baseline_scores",
        "The frozen hidden-eval scores of each untrained base model on this task's family.",
        {},
        [],
    ),
    _fn(
        SUBMIT_JOB,
        "Submit the workspace (env package + job.toml) as a training job. It is validated first; on failure you "
        "get the failed checks and may fix and resubmit a limited number of times.",
        {},
        [],
    ),
]

_SPEC = {t["function"]["name"]: t["function"]["parameters"] for t in TOOL_SCHEMAS}
_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


class ToolArgumentError(ValueError):
    pass


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """Decode and check a call's arguments against its schema (ToolArgumentError: a message for the agent)."""
    spec = _SPEC.get(call.name)
    if spec is None:
        raise ToolArgumentError(f"unknown tool {call.name!r}; available tools: {', '.join(_SPEC)}")
    text = call.arguments.strip() or "{}"
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(f"arguments of {call.name} are not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(args, dict):
        raise ToolArgumentError(f"arguments of {call.name} must be a JSON object, got {type(args).__name__}")
    props: dict[str, Any] = spec["properties"]
    for key in spec["required"]:
        if key not in args:
            raise ToolArgumentError(f"{call.name} is missing the argument {key!r}")
    for key, value in args.items():
        if key not in props:
            raise ToolArgumentError(f"{call.name} has no argument {key!r}; it takes {sorted(props) or 'none'}")
        expected = _TYPES[props[key]["type"]]
        if not isinstance(value, expected) or isinstance(value, bool) is not (expected is bool):
            raise ToolArgumentError(f"{call.name}: argument {key!r} must be a {props[key]['type']}")
    return args


@dataclass
class ToolOutcome:
    ok: bool
    content: str
    written: tuple[str, bytes] | None = None  # (clean path, bytes) when a file changed
    submit: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def run_tool(call: ToolCall, workspace: Workspace, baselines: dict[str, float]) -> ToolOutcome:
    """Execute one non-submit tool call. Never raises for anything the agent did."""
    try:
        args = parse_arguments(call)
    except ToolArgumentError as exc:
        return ToolOutcome(False, f"error: {exc}")
    try:
        if call.name == "read_file":
            return ToolOutcome(True, workspace.read(args["path"]))
        if call.name == "write_file":
            rel, data = workspace.write(args["path"], args["content"])
            return ToolOutcome(True, f"wrote {rel} ({len(data)} bytes)", written=(rel.as_posix(), data))
        if call.name == "edit_file":
            rel, data = workspace.edit(args["path"], args["old_text"], args["new_text"])
            return ToolOutcome(True, f"edited {rel} ({len(data)} bytes)", written=(rel.as_posix(), data))
        if call.name == "list_files":
            files = workspace.list(args.get("directory", ""))
            return ToolOutcome(True, "\n".join(files) if files else "(no files)")
        if call.name == "get_baseline_scores":
            lines = [f"{model}: {score:.3f}" for model, score in sorted(baselines.items())]
            return ToolOutcome(True, "\n".join(lines) if lines else "no frozen baselines for this family yet")
        if call.name == SUBMIT_JOB:
            return ToolOutcome(True, "", submit=True)
    except WorkspaceError as exc:
        return ToolOutcome(False, f"error: {exc}")
    except OSError as exc:
        return ToolOutcome(False, f"error: {exc.strerror or exc}")
    raise AssertionError(f"tool {call.name} has a schema but no implementation")  # pragma: no cover
