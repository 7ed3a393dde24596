"""The committed specs are exactly what the family code renders, and carry nothing hidden."""

from __future__ import annotations

import pytest

from families import FAMILIES, get_family, hidden_tasks
from families.spec_render import main, render_spec, spec_bytes, spec_path


def importable(name: str) -> bool:
    try:
        get_family(name)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_committed_spec_matches_the_code(name, fast):
    if not importable(name):
        pytest.skip(f"families.{name} is not importable yet")
    path = spec_path(name, fast)
    assert path.read_bytes() == spec_bytes(render_spec(name, fast)), (
        f"{path} is stale: run .venv/bin/python -m families.spec_render --write"
    )


@pytest.mark.parametrize("name", ["calc_chain", "string_pipeline", "ledger"])
def test_specs_never_contain_hidden_tasks(name):
    text = spec_path(name).read_text() + spec_path(name, fast=True).read_text()
    leaked = [t.id for t in hidden_tasks(get_family(name)) if t.prompt in text]
    assert not leaked


def test_check_and_write(tmp_path, capsys):
    assert main(["--dir", str(tmp_path)]) == 1
    assert "differs from the code" in capsys.readouterr().err
    assert main(["--dir", str(tmp_path), "--write"]) in (0, 1)  # 1 only if some family does not import
    written = {p.name for p in tmp_path.iterdir()}
    assert {"calc_chain_v1.json", "ledger_v1_fast.json", "string_pipeline_v1.json"} <= written
    assert (tmp_path / "ledger_v1.json").read_bytes() == spec_bytes(render_spec("ledger"))
