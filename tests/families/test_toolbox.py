"""ToolBox: model mistakes come back as error strings; tool bugs raise."""

from __future__ import annotations

import pytest

from families import ToolBox, ToolError


def greet(name: str) -> str:
    """Say hello.

    Args:
        name: who to greet
    """
    if name == "nobody":
        raise ToolError("nobody is there")
    if name == "bug":
        raise KeyError("a real bug")
    return f"hello {name}"


def test_call_and_errors():
    box = ToolBox([greet])
    assert list(box.functions()) == ["greet"]
    assert box.call("greet", {"name": "ada"}) == "hello ada"
    assert box.call("greet", {"name": "nobody"}) == "error: nobody is there"
    assert box.call("greet", {}) == "error: missing argument 'name' for greet"
    assert box.call("wave", {}) == "error: unknown tool 'wave'; available: greet"
    with pytest.raises(KeyError):
        box.call("greet", {"name": "bug"})
    assert box.schemas()[0]["function"]["parameters"]["properties"]["name"]["description"] == "who to greet"


def test_duplicate_names_and_read_only_mapping():
    with pytest.raises(ValueError, match="duplicate tool name 'greet'"):
        ToolBox([greet, greet])
    box = ToolBox([greet])
    with pytest.raises(TypeError):
        box.functions()["other"] = greet  # type: ignore[index]
