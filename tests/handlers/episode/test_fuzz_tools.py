"""Fuzz every tool an agent can call: the harness's workspace tools (handlers/episode/tools.py) and every
family's task tools (families/*), with random names and arguments (tests/fuzzing.py: budgets, tally).

Each call must return a result the agent can read, never raise (the episode goes on): arguments that do not
fit the tool's own JSON schema (checked independently with jsonschema) must come back as ``error: ...``; a
call that fits may succeed or be refused with ``error: ...``. Nothing escapes the workspace.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from families import FAMILIES, get_family
from handlers.episode.tools import TOOL_SCHEMAS, run_tool
from handlers.episode.workspace import Workspace
from handlers.ports.policy import ToolCall
from tests.fuzzing import fuzz_settings, record

HARNESS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOL_SCHEMAS}
TASKS = {name: get_family(name).generate("dev", seed=7) for name in sorted(FAMILIES)}
BOXES = {name: get_family(name).tools(task) for name, task in TASKS.items()}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
PATHS = st.sampled_from(["job.toml", "env/x.py", "../escape", "/etc/passwd", "~/x", "a\0b", "", ".", "env/../../x"])


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly near the schema (its keys, random values), sometimes anything."""
    props = list(schema.get("properties", {}))
    keys = st.sampled_from([*props, "extra", "path"]) if props else st.sampled_from(["extra", "path", "a"])
    values = json_values | PATHS | st.text(max_size=30)
    return st.dictionaries(keys, values, max_size=4)


def _one_line_error(out: str) -> bool:
    return out.startswith("error: ") and bool(out[7:].strip())


@fuzz_settings(ci=150, long=2000)
@given(data=st.data())
def test_random_calls_to_the_harness_tools_get_a_tool_result(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from([*HARNESS, "rm_rf", ""]))
    schema = HARNESS.get(name, {})
    raw = data.draw(
        arguments_for(schema).map(json.dumps)
        | st.sampled_from(["", "[]", "null", "{", '{"path": 1}', "1e999", '"x"'])
        | st.text(max_size=20)
    )
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "ws"
        (root / "env").mkdir(parents=True)
        (root / "job.toml").write_text("[prime_rl]\n")
        try:
            out = run_tool(ToolCall(id="c", name=name, arguments=raw), Workspace(root), {"m": 0.1})
        except Exception:
            record("agent tool calls", "traceback", "harness")
            raise
        assert {p.name for p in Path(d).iterdir()} == {"ws"}  # nothing written outside the workspace
    try:
        args = json.loads(raw.strip() or "{}")
        fits = name in HARNESS and isinstance(args, dict)
        fits = fits and not list(jsonschema.Draft202012Validator(schema).iter_errors(args))
    except ValueError:
        fits = False
    if out.ok:
        if not fits:
            record("agent tool calls", "silent_accept", "harness")
            raise AssertionError(f"{name}({raw!r}) does not fit the schema, yet succeeded: {out.content[:200]}")
        record("agent tool calls", "accepted", "harness")
    else:
        assert _one_line_error(out.content), out.content
        record("agent tool calls", "clean_error", "harness")


@fuzz_settings(ci=200, long=3000)
@given(data=st.data())
def test_random_calls_to_every_family_tool_get_a_tool_result(data: st.DataObject) -> None:
    family = data.draw(st.sampled_from(sorted(BOXES)))
    box = BOXES[family]
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in box.schemas()}
    name = data.draw(st.sampled_from([*schemas, "nope"]))
    args = data.draw(arguments_for(schemas.get(name, {})))
    try:
        out = box.call(name, args)
    except Exception:
        record("agent tool calls", "traceback", family)
        raise
    assert isinstance(out, str)
    fits = name in schemas and not list(jsonschema.Draft202012Validator(schemas[name]).iter_errors(args))
    if out.startswith("error: "):
        assert _one_line_error(out), out
        record("agent tool calls", "clean_error", family)
    elif not fits:
        record("agent tool calls", "silent_accept", family)
        raise AssertionError(f"{family}.{name}({args!r}) does not fit the schema, yet answered {out[:200]!r}")
    else:
        record("agent tool calls", "accepted", family)
