"""Tool schemas from typed functions, and argument checking that mirrors the served tools."""

from __future__ import annotations

from typing import Literal

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from families._schema import ArgumentError, parse_arguments, tool_schema


def pick(kind: Literal["red", "blue"], count: int, tags: list[str], ratio: float = 0.5, loud: bool = False) -> str:
    """Pick some things.

    Args:
        kind: which colour
        count: how many; a long description
            that wraps onto a second line
        tags: labels to attach
    """
    return f"{kind}{count}{tags}{ratio}{loud}"


def test_schema_shape():
    schema = tool_schema(pick)
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "pick" and fn["description"] == "Pick some things."
    props = fn["parameters"]["properties"]
    assert props["kind"] == {"type": "string", "enum": ["red", "blue"], "description": "which colour"}
    assert props["count"]["description"] == "how many; a long description that wraps onto a second line"
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["loud"] == {"type": "boolean", "default": False}
    assert fn["parameters"]["required"] == ["kind", "count", "tags"]
    jsonschema.Draft202012Validator.check_schema(fn["parameters"])


def test_unsupported_tools_are_rejected_at_schema_time():
    def no_doc(a: int) -> str:
        return ""

    def bad_type(a: dict) -> str:  # type: ignore[type-arg]
        """Doc."""
        return ""

    def varargs(*a: int) -> str:
        """Doc."""
        return ""

    with pytest.raises(TypeError, match="docstring"):
        tool_schema(no_doc)
    with pytest.raises(TypeError, match="unsupported tool parameter type"):
        tool_schema(bad_type)
    with pytest.raises(TypeError, match="plain named parameter"):
        tool_schema(varargs)


def test_parse_arguments_errors_are_model_facing():
    ok = {"kind": "red", "count": 2, "tags": ["x"]}
    assert parse_arguments(pick, ok) == ok
    with pytest.raises(ArgumentError, match="missing argument 'count'"):
        parse_arguments(pick, {"kind": "red", "tags": []})
    with pytest.raises(ArgumentError, match="unexpected argument"):
        parse_arguments(pick, {**ok, "colour": 1})
    with pytest.raises(ArgumentError, match="must be one of 'red', 'blue'"):
        parse_arguments(pick, {**ok, "kind": "green"})
    with pytest.raises(ArgumentError, match="'count' must be an integer"):
        parse_arguments(pick, {**ok, "count": 2.5})
    with pytest.raises(ArgumentError, match="'count' must be an integer"):
        parse_arguments(pick, {**ok, "count": True})
    with pytest.raises(ArgumentError, match=r"'tags\[1\]' must be string"):
        parse_arguments(pick, {**ok, "tags": ["a", 3]})
    with pytest.raises(ArgumentError, match="'loud' must be boolean"):
        parse_arguments(pick, {**ok, "loud": "yes"})
    with pytest.raises(ArgumentError, match="'ratio' must be number"):
        parse_arguments(pick, {**ok, "ratio": "lots"})


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_integers_arrive_lax_like_pydantic(n):
    base = {"kind": "blue", "tags": []}
    for given_as in (n, float(n), str(n), f" {n} "):
        assert parse_arguments(pick, {**base, "count": given_as})["count"] == n
