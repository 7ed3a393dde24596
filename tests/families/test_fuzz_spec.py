"""Fuzz task spec loading with mutated copies of the committed specs (tests/fuzzing.py: budgets, tally).

Targeted mutations are wrong by construction and must be refused naming the file and the field: a tool
schema that is no JSON schema (``"required": [["a"]]``, ``"type": 123``...), a dev example's arguments that do
not fit its tool's schema. Blind mutations of the JSON tree (a value replaced, a key dropped) must be
accepted or refused with a :class:`SpecError` naming the file; nothing else escapes.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from families.spec import SpecError, load_spec
from tests.fuzzing import fuzz_settings, record, untallied

SURFACE = "task specs"
TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks"
NAMES = sorted(p.stem for p in TASKS.glob("*_fast.json"))
SPECS = {n: json.loads((TASKS / f"{n}.json").read_text()) for n in NAMES}

BAD_SCHEMA_EDITS: list[tuple[str, Any]] = [
    ("required", [["a"]]),
    ("type", 123),
    ("type", "objekt"),
    ("properties", []),
    ("required", "a"),
    ("additionalProperties", "no"),
    ("minProperties", -1),
]
WRONG_FOR_TYPE = {"string": 12345, "integer": "x", "number": "x", "array": "x", "object": "x", "boolean": "x"}


@st.composite
def mutated_specs(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    """(spec name, mutated document, expected field prefix or "" for a blind mutation)."""
    name = draw(st.sampled_from(NAMES))
    doc = copy.deepcopy(SPECS[name])
    kind = draw(st.sampled_from(["bad_tool_schema", "bad_arguments", "blind", "blind"]))
    if kind == "bad_tool_schema":
        i = draw(st.integers(0, len(doc["tools"]) - 1))
        key, value = draw(st.sampled_from(BAD_SCHEMA_EDITS))
        doc["tools"][i]["function"]["parameters"][key] = value
        return name, doc, f"$.tools[{i}].function.parameters"
    if kind == "bad_arguments":
        calls = [
            (i, j, step)
            for i, ex in enumerate(doc["dev_examples"])
            for j, step in enumerate(ex["solution"])
            if step.get("tool")
        ]
        i, j, step = draw(st.sampled_from(calls))
        schema = next(t["function"]["parameters"] for t in doc["tools"] if t["function"]["name"] == step["tool"])
        props = schema.get("properties", {})
        required = [r for r in schema.get("required", []) if r in step["arguments"]]
        typed = [p for p, s in props.items() if s.get("type") in WRONG_FOR_TYPE]
        how = draw(st.sampled_from([h for h, ok in (("drop", required), ("retype", typed)) if ok]))
        if how == "drop":
            del step["arguments"][draw(st.sampled_from(required))]
        else:
            prop = draw(st.sampled_from(typed))
            step["arguments"][prop] = WRONG_FOR_TYPE[props[prop]["type"]]
        return name, doc, f"$.dev_examples[{i}].solution[{j}].arguments"
    # Blind: replace a value somewhere in the tree, or drop a key.
    node: Any = doc
    for _ in range(draw(st.integers(1, 5))):
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        k = draw(st.sampled_from(keys))
        child = node[k]
        if not isinstance(child, dict | list) or draw(st.booleans()):
            value = draw(st.sampled_from([None, 0, -1, 1.5, "", "x", [], {}, True, 2**70, ["a"]]))
            if isinstance(node, dict) and draw(st.booleans()):
                del node[k]
            else:
                node[k] = value
            break
        node = child
    return name, doc, ""


def check_one(name: str, doc: dict[str, Any], field: str, workdir: Path) -> None:
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(doc))
    try:
        load_spec(path)
    except SpecError as exc:
        msg = str(exc)
        assert all(line.startswith(str(path)) for line in msg.split("\n")), msg
        if field:
            assert f": {field}" in msg, f"the error does not name {field}: {msg}"
        record(SURFACE, "clean_error", "targeted" if field else "blind")
        return
    except Exception:
        record(SURFACE, "traceback")
        raise
    if field:
        record(SURFACE, "silent_accept")
        raise AssertionError(f"{field} broken, yet the spec was accepted")
    record(SURFACE, "accepted", "blind")


@fuzz_settings(ci=150, long=2000)
@given(case=mutated_specs())
def test_every_mutated_spec_is_refused_naming_the_field_or_valid(case: tuple[str, dict[str, Any], str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        check_one(*case, Path(d))


def test_the_committed_specs_pass_the_schema_checks() -> None:
    for name in NAMES:
        load_spec(TASKS / f"{name}.json")


def test_a_nested_required_list_and_mismatched_arguments_are_named(tmp_path: Path) -> None:
    doc = copy.deepcopy(SPECS["calc_chain_v1_fast"])
    doc["tools"][0]["function"]["parameters"]["required"] = [["a"]]
    doc["dev_examples"][0]["solution"][0]["arguments"] = {"a": "3", "b": 2}
    path = tmp_path / "calc_chain_v1_fast.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    lines = str(info.value).split("\n")
    assert f"{path}: $.tools[0].function.parameters: not a valid JSON schema: " in lines[0]
    want = "$.dev_examples[0].solution[0].arguments: do not fit tool 'sub': a: '3' is not of type 'integer'"
    assert lines[1] == f"{path}: {want}"


def test_the_oracle_catches_a_silent_accept(tmp_path: Path) -> None:
    with untallied(), pytest.raises(AssertionError, match="yet the spec was accepted"):
        check_one("calc_chain_v1_fast", SPECS["calc_chain_v1_fast"], "$.tools[0].function.parameters", tmp_path)
