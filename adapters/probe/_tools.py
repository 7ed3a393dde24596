"""The tools check: the env's tools, as the model would see them, against the task's eval tool interface.

Names must match exactly (the model-facing name, prefix included: a ``vf.Toolset`` prefixes its tools
with ``<server>_`` unless ``TOOL_PREFIX = None``), and so must each tool's parameters: the same names, the
same JSON types (and enum values where the spec has them), the same required set. Descriptions and titles
may differ (mcp derives them from the Python signature).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from families.spec import ToolSpec

__all__ = ["compare_tools"]


def _type_of(schema: dict[str, Any]) -> str:
    """A parameter's JSON type; ``anyOf`` of one type plus null counts as that type (optional)."""
    if "type" in schema:
        kind = schema["type"]
        return "|".join(sorted(kind)) if isinstance(kind, list) else str(kind)
    options = [o for o in schema.get("anyOf", []) if isinstance(o, dict) and o.get("type") != "null"]
    if len(options) == 1:
        return _type_of(options[0])
    if "enum" in schema:
        return "enum"
    return "any"


def _signature(params: dict[str, Any]) -> str:
    props: dict[str, Any] = params.get("properties", {})
    required = set(params.get("required", []))
    return "(" + ", ".join(f"{n}: {_type_of(p)}{'' if n in required else '?'}" for n, p in props.items()) + ")"


def _param_problems(name: str, want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    want_props: dict[str, Any] = want.get("properties", {})
    got_props: dict[str, Any] = got.get("properties", {})
    missing = [p for p in want_props if p not in got_props]
    extra = [p for p in got_props if p not in want_props]
    if missing:
        problems.append(f"missing parameter(s) {missing}")
    if extra:
        problems.append(f"unexpected parameter(s) {extra}")
    for p in want_props:
        if p in got_props:
            w, g = _type_of(want_props[p]), _type_of(got_props[p])
            if w != g:
                problems.append(f"parameter {p!r} is {g}, expected {w}")
            elif "enum" in want_props[p] and sorted(map(str, want_props[p]["enum"])) != sorted(
                map(str, got_props[p].get("enum", []))
            ):
                problems.append(f"parameter {p!r} allows {got_props[p].get('enum')}, expected {want_props[p]['enum']}")
    want_req, got_req = set(want.get("required", [])), set(got.get("required", []))
    if want_req != got_req and not missing and not extra:
        problems.append(f"required parameters are {sorted(got_req)}, expected {sorted(want_req)}")
    if problems:
        return [f"{name}{_signature(got)} vs expected {name}{_signature(want)}: " + "; ".join(problems)]
    return []


def compare_tools(spec_tools: Sequence[ToolSpec], env_tools: Sequence[dict[str, Any]]) -> tuple[bool, str]:
    """(ok, detail) comparing the spec's tools with the child's ``tools`` reply."""
    want = {t.function.name: t.function.parameters for t in spec_tools}
    got: dict[str, dict[str, Any]] = {}
    duplicates = []
    for tool in env_tools:
        name = str(tool.get("name"))
        if name in got:
            duplicates.append(name)
        got[name] = dict(tool.get("parameters") or {})
    problems: list[str] = []
    if not got:
        problems.append(
            "the env exposes no tools: return your vf.Toolset from Taskset.toolsets() (shared) or Task.toolsets()"
        )
    missing = [n for n in want if n not in got]
    extra = [n for n in got if n not in want]
    if missing:
        problems.append(f"missing tool(s) {missing}")
    if extra:
        hint = ""
        if any(n.endswith("_" + m) for n in extra for m in missing):
            hint = " (set TOOL_PREFIX = None on your Toolset so tools keep their bare names)"
        problems.append(f"tool(s) not in the eval interface {extra}{hint}")
    if duplicates:
        problems.append(f"duplicate tool name(s) {sorted(set(duplicates))}")
    for name in want:
        if name in got:
            problems += _param_problems(name, want[name], got[name])
    if problems:
        interface = ", ".join(f"{n}{_signature(p)}" for n, p in want.items())
        return False, " | ".join(problems) + f" | the eval interface is: {interface}"
    return True, f"{len(got)} tools match the eval interface: " + ", ".join(f"{n}{_signature(got[n])}" for n in got)
