"""The tools comparison against a spec's eval tool interface."""

from __future__ import annotations

from typing import Any

from adapters.probe._tools import compare_tools
from families.spec import TaskSpec


def _mcp(name: str, **params: str) -> dict[str, Any]:
    """A tool as the sandbox reports it (mcp's schema: titles, no descriptions)."""
    props = {p: {"title": p.upper(), "type": t} for p, t in params.items()}
    return {"name": name, "parameters": {"type": "object", "properties": props, "required": list(params)}}


def _exact(spec: TaskSpec) -> list[dict[str, Any]]:
    return [
        _mcp(t.function.name, **{p: s["type"] for p, s in t.function.parameters["properties"].items()})
        for t in spec.tools
    ]


def test_matching_tools_pass(calc_spec: TaskSpec) -> None:
    ok, detail = compare_tools(calc_spec.tools, _exact(calc_spec))
    assert ok, detail
    assert "4 tools match" in detail


def test_missing_extra_and_renamed_parameters_fail(calc_spec: TaskSpec) -> None:
    tools = _exact(calc_spec)
    tools = [t for t in tools if t["name"] != "div"] + [_mcp("pow", a="integer", b="integer")]
    tools[0] = _mcp("add", x="integer", b="integer")
    ok, detail = compare_tools(calc_spec.tools, tools)
    assert not ok
    assert "missing tool(s) ['div']" in detail
    assert "tool(s) not in the eval interface ['pow']" in detail
    assert "missing parameter(s) ['a']" in detail and "unexpected parameter(s) ['x']" in detail


def test_wrong_type_and_optional_parameter_fail(calc_spec: TaskSpec) -> None:
    tools = _exact(calc_spec)
    tools[1] = _mcp("sub", a="string", b="integer")
    tools[2]["parameters"]["required"] = ["a"]
    ok, detail = compare_tools(calc_spec.tools, tools)
    assert not ok
    assert "parameter 'a' is string, expected integer" in detail
    assert "required parameters are ['a'], expected ['a', 'b']" in detail


def test_no_tools_and_duplicates_are_explained(calc_spec: TaskSpec) -> None:
    ok, detail = compare_tools(calc_spec.tools, [])
    assert not ok and "exposes no tools" in detail
    ok, detail = compare_tools(calc_spec.tools, [*_exact(calc_spec), _exact(calc_spec)[0]])
    assert not ok and "duplicate tool name(s) ['add']" in detail
