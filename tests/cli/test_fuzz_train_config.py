"""Fuzz the run config loader (``ait train --config``) with mutated copies of the smoke and seed configs.

Wrong-by-construction mutations (tests/fuzz_toml.py) must be refused with one line naming the file, the
mutated line and the key; blind ones accepted or refused with one line naming the file; nothing else escapes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.train_config import load_run_config
from handlers.training import ConfigError
from tests.fuzz_toml import Mutant, check_refusal, check_silence, toml_mutants
from tests.fuzzing import fuzz_settings, record, untallied

SURFACE = "run config TOML"
CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"
BASES = {name: (CONFIGS / f"{name}.toml").read_text() for name in ("smoke", "seed")}


def check_one(m: Mutant, workdir: Path) -> None:
    path = workdir / "run.toml"
    path.write_bytes(m.data)
    try:
        load_run_config(path, runs_root=workdir)
    except ConfigError as exc:
        check_refusal(m, path, str(exc))
        record(SURFACE, "clean_error", m.kind)
        return
    except Exception:
        record(SURFACE, "traceback", m.kind)
        raise
    check_silence(m, SURFACE)
    record(SURFACE, "accepted", m.kind)


@fuzz_settings(ci=300, long=4000)
@given(data=st.data(), base=st.sampled_from(sorted(BASES)))
def test_every_mutated_run_config_is_refused_on_its_line_or_valid(data: st.DataObject, base: str) -> None:
    mutant = data.draw(toml_mutants(BASES[base], open_tables=("baselines",)))
    with tempfile.TemporaryDirectory() as d:
        check_one(mutant, Path(d))


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('max_pods = "12"', "[fleet] max_pods: Expected `int`, got `str`"),
        ('tick_s = "0.2"', "[fleet] tick_s: Expected `float`, got `str`"),
    ],
)
def test_a_quoted_number_is_no_number(tmp_path: Path, line: str, needle: str) -> None:
    key = line.split()[0]
    text = "\n".join(line if s.startswith(f"{key} =") else s for s in BASES["smoke"].split("\n"))
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_run_config(path)
    n = text.split("\n").index(line) + 1
    assert str(info.value) == f"{path}:{n}: {needle}"


def test_a_non_utf8_byte_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_bytes(b'[run]\nname = "sm\xffoke"\n')
    with pytest.raises(ConfigError, match=r":2: not UTF-8 text \(byte\(s\) ff at column 11\)$"):
        load_run_config(path)


def test_the_oracle_catches_a_silent_accept(tmp_path: Path) -> None:
    """A targeted mutation that the loader took is reported: the oracle can fail."""
    valid = Mutant(BASES["smoke"].encode(), "quote_number", 9, "seed", must_fail=True)
    with untallied(), pytest.raises(AssertionError, match="accepted without complaint"):
        check_one(valid, tmp_path)
