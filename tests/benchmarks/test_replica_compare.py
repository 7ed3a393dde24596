"""benchmarks/replica_compare.py pools learning runs and control runs the way ``ait report`` reads each one."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from benchmarks.replica_compare import main
from tests.fakes.replica_log import BEST, WORST, write_grid, write_replica_log


def test_a_rising_arm_excludes_zero_and_a_flat_control_does_not(tmp_path: Path) -> None:
    mixed = (WORST, BEST, WORST, BEST)
    rising = [((WORST,) * 4, 0.2)] * 2 + [(mixed, 0.3)] * 2 + [((BEST,) * 4, 0.5)] * 2
    flat = [(mixed, 0.3)] * 6
    runs = {"learn-s0": rising, "learn-s1": rising, "control-s0": flat}
    for name, steps in runs.items():
        write_replica_log(tmp_path / name, steps, holdout=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "--learn", str(tmp_path / "learn-s0"), str(tmp_path / "learn-s1"),
                "--control", str(tmp_path / "control-s0"),
                "--grid", str(write_grid(tmp_path)),
                "--plot", str(tmp_path / "compare.png"),
            ]
        )  # fmt: skip
    assert code == 0
    rows = {line.split("|")[1].strip(): line for line in out.getvalue().splitlines() if line.startswith("| ")}
    # k = 3 of 6 steps: first 0.2, 0.2, 0.3 (+0.01 * i), last 0.3, 0.5, 0.5: a rise of +0.2 over 24 episodes each.
    assert "**+0.200 [" in rows["**learn, pooled**"] and "(n=24)" in rows["**learn, pooled**"]
    low = float(rows["**learn, pooled**"].split("**+0.200 [")[1].split(",")[0])
    assert low > 0
    # The best share: 2 of 12 episodes per run in the first steps, 10 of 12 in the last.
    assert "0.17 -> 0.83" in rows["learn"]
    assert "+0.000 [" in rows["**control, pooled**"]
    # Against the control (one run, flat at 0.3): the learning arm starts lower (0.233) and ends higher (0.433), so
    # its last steps lead by 0.133, and its rise beats the control's by the whole +0.2 (24 + 24 + 12 + 12 episodes).
    assert "| +0.133 [" in rows["last k steps: learn - control"]
    assert "| -0.067 [" in rows["first k steps: learn - control"]
    did = rows["rise: learn - control (difference in differences)"]
    assert "| +0.200 [" in did and "(n=72)" in did and float(did.split("| +0.200 [")[1].split(",")[0]) > 0
    assert (tmp_path / "compare.png").stat().st_size > 0


def test_a_run_without_replica_choices_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    write_replica_log(tmp_path / "plain", [], holdout=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["--learn", str(tmp_path / "plain")]) == 2
    assert "no replica choices" in err.getvalue()


def test_a_run_under_another_eval_key_than_the_grid_is_named(tmp_path: Path) -> None:
    steps = [((WORST,) * 4, 0.2), ((BEST,) * 4, 0.5)]
    write_replica_log(tmp_path / "same", steps, holdout=False, key_fingerprint="d784abb44216ecb5")
    write_replica_log(tmp_path / "other", steps, holdout=False, key_fingerprint="0123456789abcdef")
    grid = str(write_grid(tmp_path, key_fingerprint="d784abb44216ecb5"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["--learn", str(tmp_path / "same"), str(tmp_path / "other"), "--grid", grid]) == 0
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("replica_compare: other: careful, the grid was measured"), lines


def _tables(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return "\n".join(line for line in out.getvalue().splitlines() if line.startswith("|"))


def test_saved_summaries_give_the_same_tables_as_the_run_directories(tmp_path: Path) -> None:
    mixed = (WORST, BEST, WORST, BEST)
    write_replica_log(tmp_path / "learn", [((WORST,) * 4, 0.2)] * 3 + [((BEST,) * 4, 0.5)] * 3, holdout=True)
    write_replica_log(tmp_path / "control", [(mixed, 0.3)] * 6, holdout=False)
    grid = str(write_grid(tmp_path))
    from_dirs = _tables(
        ["--learn", str(tmp_path / "learn"), "--control", str(tmp_path / "control"), "--grid", grid,
         "--save", str(tmp_path / "saved")]
    )  # fmt: skip
    saved = sorted((tmp_path / "saved").glob("*.json"))
    assert len(saved) == 2 and "+0.300 [" in from_dirs  # the rise is there to compare
    learn, control = (next(p for p in saved if p.name.startswith(arm)) for arm in ("learn", "control"))
    # The summaries alone (the run directories gone) print the very same tables.
    for name in ("learn", "control"):
        shutil.rmtree(tmp_path / name)
    assert _tables(["--learn", str(learn), "--control", str(control), "--grid", grid]) == from_dirs


def test_a_file_that_is_not_a_saved_summary_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"run_id": 3}')
    with pytest.raises(SystemExit) as exc:
        main(["--learn", str(bad)])
    assert str(bad) in str(exc.value) and "saved run summary" in str(exc.value)


def test_the_committed_round_two_summaries_print_what_docs_replica_says() -> None:
    runs = Path(__file__).resolve().parents[2] / "examples" / "replica" / "runs"
    doc = (runs.parents[2] / "docs" / "replica.md").read_text()
    tables = _tables(
        ["--learn", str(runs / "learn-seed1.json"),
         "--control", str(runs / "control-seed0.json"), str(runs / "control-seed1.json")]
    )  # fmt: skip
    rows = {line.split("|")[1].strip(): line for line in tables.splitlines()}
    # The figures docs/replica.md quotes for these runs, as the summaries give them now.
    for row, figure in (
        ("**control, pooled**", "+0.003 [-0.023, +0.031]"),
        ("learn", "+0.039 [+0.013, +0.069]"),
        ("last k steps: learn - control", "+0.082 [+0.058, +0.106]"),
        ("rise: learn - control (difference in differences)", "+0.036 [-0.004, +0.075]"),
    ):
        assert figure in rows[row] and figure in doc, (row, figure)
    pair = _tables(["--learn", str(runs / "learn-seed1.json"), "--control", str(runs / "control-seed1.json")])
    assert "+0.052 [+0.006, +0.098]" in pair and "+0.052 [+0.006, +0.098]" in doc
