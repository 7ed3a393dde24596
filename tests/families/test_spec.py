"""Spec loading: committed specs are valid, and every kind of bad input names the file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from families.spec import SpecError, load_spec, load_specs

SPEC_DIR = Path(__file__).resolve().parents[2] / "examples" / "tasks"
GOOD = SPEC_DIR / "calc_chain_v1.json"


def test_every_committed_spec_loads():
    specs = load_specs(SPEC_DIR)
    for family in ("calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"):
        full, fast = specs[f"{family}_v1"], specs[f"{family}_v1_fast"]
        assert full.held_out == fast.held_out == (family == "triage")
        assert fast.bounds.max_steps < full.bounds.max_steps
        assert fast.bounds.time_budget_s < full.bounds.time_budget_s
        assert full.tools == fast.tools and full.dev_examples == fast.dev_examples


def write(tmp_path: Path, doc, name: str = "calc_chain_v1.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


def mutated(change) -> dict:
    doc = json.loads(GOOD.read_text())
    change(doc)
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["bounds"].update(max_steps="ten"), r"\$\.bounds\.max_steps: expected int, got str"),
        (lambda d: d["bounds"].pop("seq_len"), r"\$\.bounds\.seq_len: required field is missing"),
        (lambda d: d["bounds"].update(epochs=3), r"\$\.bounds\.epochs: unknown field"),
        (lambda d: d["tools"][0].update(type="fn"), r"\$\.tools\[0\]\.type: invalid enum value 'fn'"),
        (lambda d: d.update(held_out=True), r"\$\.held_out: must be false for calc_chain"),
        (lambda d: d.update(family="chess", name="chess_v1"), r"\$\.family: unknown family 'chess'"),
        (lambda d: d["bounds"].update(base_models=["gpt2"]), r"\$\.bounds\.base_models\[0\]: 'gpt2' not in"),
        (lambda d: d["bounds"]["batch_size"].update(min=64, max=32), r"\$\.bounds\.batch_size: need 0 < min"),
        (lambda d: d["bounds"]["learning_rate"].update(max=3.0), r"\$\.bounds\.learning_rate\.max: must be < 1"),
        (lambda d: d.update(dev_examples=[]), r"\$\.dev_examples: must not be empty"),
        (lambda d: d["dev_examples"][0]["solution"][0].update(tool="pow"), r"solution\[0\]\.tool: not in"),
        (lambda d: d["dev_examples"][0].update(answer="nope"), r"\$\.dev_examples\[0\]\.solution: must end"),
        (lambda d: d["eval"].update(temperature=5.0), r"\$\.eval\.temperature: must be in \[0, 2\]"),
        (lambda d: d.update(fast=True), r"\$\.name: expected 'calc_chain_v1_fast'"),
    ],
)
def test_errors_name_the_file_and_field(tmp_path, change, message):
    path = write(tmp_path, mutated(change))
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: ")


def test_name_must_match_the_file(tmp_path):
    path = write(tmp_path, mutated(lambda d: None), name="renamed.json")
    with pytest.raises(SpecError, match=r"\$\.name: 'calc_chain_v1' does not match the file name 'renamed.json'"):
        load_spec(path)


def test_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path, '{\n  "name": "calc_chain_v1",\n  "family": ,\n}')
    with pytest.raises(SpecError, match=rf"^{path}:3: invalid JSON"):
        load_spec(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "absent.json")


def test_several_problems_are_all_reported(tmp_path):
    def change(d):
        d["bounds"]["max_steps"] = 0
        d["eval"]["max_turns"] = 0

    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, mutated(change)))
    assert "$.bounds.max_steps: must be > 0" in str(info.value) and "$.eval.max_turns: must be > 0" in str(info.value)
