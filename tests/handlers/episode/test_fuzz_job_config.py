"""Fuzz job.toml (the agent's submission) with mutated copies of the reference jobs, loaded as the validators do.

Wrong-by-construction mutations (tests/fuzz_toml.py) must be refused with one line naming the file, the
mutated line and the key; blind ones accepted (then checked against the task's bounds, each problem naming
its key) or refused with one line naming the file. Nothing else escapes, a non-UTF-8 byte included.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from families.spec import load_spec
from handlers.episode.job_config import JobConfigError, check_bounds, load_job_config
from tests.fuzz_toml import Mutant, check_refusal, check_silence, toml_mutants
from tests.fuzzing import fuzz_settings, record, untallied

SURFACE = "job.toml"
ROOT = Path(__file__).resolve().parents[3]
FAMILIES = ("calc_chain", "string_pipeline", "ledger")
BASES = {f: (ROOT / "fixtures" / "envs" / f / "job.toml").read_text() for f in FAMILIES}
SPECS = {f: load_spec(ROOT / "examples" / "tasks" / f"{f}_v1.json") for f in FAMILIES}


def check_one(m: Mutant, family: str, workdir: Path) -> None:
    path = workdir / "job.toml"
    path.write_bytes(m.data)
    try:
        job = load_job_config(path)
    except JobConfigError as exc:
        check_refusal(m, path, str(exc))
        record(SURFACE, "clean_error", m.kind)
        return
    except Exception:
        record(SURFACE, "traceback", m.kind)
        raise
    check_silence(m, SURFACE)
    try:
        problems = check_bounds(job.prime_rl, SPECS[family].bounds, str(path))
    except Exception:
        record(SURFACE, "traceback", "bounds")
        raise
    assert all("\n" not in p and p.startswith(f"{path}: [prime_rl].") for p in problems), problems
    record(SURFACE, "clean_error" if problems else "accepted", f"{m.kind}.{'bounds' if problems else 'ok'}")


@fuzz_settings(ci=300, long=4000)
@given(data=st.data(), family=st.sampled_from(FAMILIES))
def test_every_mutated_job_toml_is_refused_on_its_line_or_valid(data: st.DataObject, family: str) -> None:
    mutant = data.draw(toml_mutants(BASES[family]))
    with tempfile.TemporaryDirectory() as d:
        check_one(mutant, family, Path(d))


def test_a_quoted_number_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    text = BASES["calc_chain"]
    steps = next(ln for ln in text.splitlines() if ln.startswith("max_steps = "))  # the mutation's target
    path.write_text(text.replace(steps, f'max_steps = "{steps.removeprefix("max_steps = ")}"'))
    line = 1 + text.splitlines().index(steps)
    with pytest.raises(JobConfigError) as info:
        load_job_config(path)
    assert str(info.value) == f"{path}:{line}: [prime_rl].max_steps: Expected `int`, got `str`"


def test_a_non_utf8_byte_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_bytes(BASES["calc_chain"].encode().replace(b"grpo", b"gr\xe9po"))
    with pytest.raises(JobConfigError, match=r"job\.toml:15: not UTF-8 text \(byte\(s\) e9 at column 16\)$"):
        load_job_config(path)


def test_the_oracle_catches_a_silent_accept(tmp_path: Path) -> None:
    valid = Mutant(BASES["calc_chain"].encode(), "quote_number", 7, "max_steps", must_fail=True)
    with untallied(), pytest.raises(AssertionError, match="accepted without complaint"):
        check_one(valid, "calc_chain", tmp_path)
