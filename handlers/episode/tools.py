"""The trainer agent's tools: JSON-schema definitions and their execution against the workspace.

A malformed call (unknown tool, arguments that are not a JSON object, a missing or mistyped argument)
and every refused file operation come back as a tool result the agent can read, never as an exception
that ends the episode. ``submit_job`` is only recognised here; the episode loop runs the probe.

A multi-job task spec (``episode.max_jobs > 1``) gives the agent :func:`tool_schemas` ``(multi=True)``: the same
tools, ``submit_job`` returning a job id instead of ending the episode, and the job tools (``job_status``,
``job_result``, ``wait_for_jobs``, ``finish``), which the episode loop runs against its own jobs. A one-shot
spec gets ``TOOL_SCHEMAS``, exactly as before, and the job tools are unknown to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from handlers.episode.workspace import Workspace, WorkspaceError
from handlers.ports.policy import ToolCall

__all__ = [
    "FINISH",
    "JOB_TOOLS",
    "MULTI_TOOL_SCHEMAS",
    "SUBMIT_JOB",
    "TOOL_SCHEMAS",
    "ToolOutcome",
    "parse_arguments",
    "run_tool",
    "tool_schemas",
]

SUBMIT_JOB = "submit_job"
FINISH = "finish"
JOB_TOOLS = ("job_status", "job_result", "wait_for_jobs", FINISH)


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

_JOB_ID = {"type": "string", "description": "a job id returned by submit_job, e.g. 'job-1'"}

MULTI_TOOL_SCHEMAS: list[dict[str, Any]] = [
    *[t for t in TOOL_SCHEMAS if t["function"]["name"] != SUBMIT_JOB],
    _fn(
        SUBMIT_JOB,
        "Submit the workspace (env package + job.toml) as a training job. It is validated first (on failure you "
        "get the failed checks and may fix and resubmit a limited number of times); a valid one is queued and you "
        "get its job id. It runs while you keep working; this task allows several jobs per episode.",
        {},
        [],
    ),
    _fn(
        "job_status",
        "A job's phase (queued, pre_score, train, post_score, succeeded, failed), training step and recent "
        "training reward.",
        {"job_id": _JOB_ID},
        ["job_id"],
    ),
    _fn(
        "job_result",
        "A finished job's training curve (reward and loss per step) and its score on the task's dev split "
        "before and after training. Hidden-eval scores are never shown.",
        {"job_id": _JOB_ID},
        ["job_id"],
    ),
    _fn(
        "wait_for_jobs",
        "Wait until the given jobs (default: all of yours) have finished, or timeout_s seconds have passed; "
        "returns each job's status.",
        {
            "job_ids": {"type": "array", "items": {"type": "string"}, "description": "job ids (default: all)"},
            "timeout_s": {"type": "number", "description": "most seconds to wait (default: 600)"},
        },
        [],
    ),
    _fn(
        FINISH,
        "End the episode, naming the job whose model is your result: its hidden-eval score after training is "
        "your reward's quality term. Every job you ran counts towards the time and cost term.",
        {"final_job_id": _JOB_ID},
        ["final_job_id"],
    ),
]


def tool_schemas(multi: bool) -> list[dict[str, Any]]:
    """The tools an episode offers: today's for a one-shot spec, the job tools too for a multi-job one."""
    return MULTI_TOOL_SCHEMAS if multi else TOOL_SCHEMAS


_SPEC = {t["function"]["name"]: t["function"]["parameters"] for t in TOOL_SCHEMAS}
_MULTI_SPEC = {t["function"]["name"]: t["function"]["parameters"] for t in MULTI_TOOL_SCHEMAS}
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


def parse_arguments(call: ToolCall, *, multi: bool = False) -> dict[str, Any]:
    """Decode and check a call's arguments against its schema (ToolArgumentError: a message for the agent)."""
    specs = _MULTI_SPEC if multi else _SPEC
    spec = specs.get(call.name)
    if spec is None:
        raise ToolArgumentError(f"unknown tool {call.name!r}; available tools: {', '.join(specs)}")
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
        item_type = props[key].get("items", {}).get("type")
        if (
            item_type is not None
            and isinstance(value, list)
            and not all(isinstance(v, _TYPES[item_type]) for v in value)
        ):
            raise ToolArgumentError(f"{call.name}: argument {key!r} must be an array of {item_type}s")
    return args


@dataclass
class ToolOutcome:
    ok: bool
    content: str
    written: tuple[str, bytes] | None = None  # (clean path, bytes) when a file changed
    submit: bool = False
    job_tool: bool = False  # one of JOB_TOOLS: the episode loop runs it with ``extra`` (its parsed arguments)
    extra: dict[str, Any] = field(default_factory=dict)


def run_tool(call: ToolCall, workspace: Workspace, baselines: dict[str, float], *, multi: bool = False) -> ToolOutcome:
    """Execute one non-submit tool call. Never raises for anything the agent did."""
    try:
        args = parse_arguments(call, multi=multi)
    except ToolArgumentError as exc:
        return ToolOutcome(False, f"error: {exc}")
    if call.name in JOB_TOOLS:
        return ToolOutcome(True, "", job_tool=True, extra=args)
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
