"""The fuzz tally's report (tests/fuzzing.py) counts every worker's inputs when the suite runs under xdist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fuzzing import TALLY, add_rows, tally_rows, untallied

ROOT = Path(__file__).resolve().parents[1]


def test_a_workers_rows_add_to_the_tally() -> None:
    with untallied():
        TALLY.clear()
        add_rows({"s": {"tried": 2, "clean_error": 1, "accepted": 1, "clean_error.torn": 1}})
        add_rows({"s": {"tried": 3, "clean_error": 3}, "t": {"tried": 1, "accepted": 1}})
        rows = tally_rows()
    assert rows["s"]["tried"] == 5 and rows["s"]["clean_error"] == 4 and rows["s"]["clean_error.torn"] == 1
    assert rows["t"]["accepted"] == 1 and rows["t"]["traceback"] == 0


def test_the_report_of_a_run_on_two_workers_counts_both(tmp_path: Path) -> None:
    """Two fuzz modules on two xdist workers: the report holds both surfaces (it was ``{}``: each worker wrote
    its own part, then the controller, which ran no test, wrote its empty tally over them)."""
    report = tmp_path / "fuzz.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AIT_FUZZ"))}
    env["AIT_FUZZ_REPORT"] = str(report)
    modules = ["tests/families/test_fuzz_spec.py", "tests/handlers/episode/test_fuzz_job_config.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *modules],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads(report.read_text())
    assert set(rows) == {"task specs", "job.toml"}
    assert all(r["tried"] > 0 and r["tried"] == r["clean_error"] + r["accepted"] for r in rows.values())
