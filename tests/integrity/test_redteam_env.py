"""Red team, env routes (real sandboxed probe): each attempt is stopped or detected, with the reason in the report.

What a stopped route leaves behind is a rejected submission (``submission.rejected`` carries these checks), so
no job runs and no score is recorded from it.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from tests.adapters.probe.scenarios import probe_result

from .conftest import Attempt, needs_bwrap


def _outcomes(run: Attempt) -> dict[str, str]:
    return probe_result(run.check("env_import").detail)


@needs_bwrap
def test_importing_families_to_regenerate_the_hidden_set_fails_in_the_sandbox(redteam_runs: dict[str, Attempt]) -> None:
    run = redteam_runs["regen_hidden"]
    got = _outcomes(run)
    assert got["import_families"].startswith("ERR:ModuleNotFoundError")
    assert got["with_project_path"].startswith("ERR:ModuleNotFoundError")  # the project is not mounted at all
    assert got["read_generator"].startswith("ERR:FileNotFoundError")
    assert not run.report.ok and not run.check("env_import").ok


@needs_bwrap
def test_the_installation_key_cannot_be_read_from_the_sandbox(redteam_runs: dict[str, Attempt]) -> None:
    run = redteam_runs["read_key"]
    got = _outcomes(run)
    assert got["env_var"] == "OK:'unset'"  # the engine's environment is not passed on
    for route in ("real_key", "default_key", "home_key"):
        assert got[route].startswith("ERR:FileNotFoundError"), (route, got[route])
    text = Path(os.environ["AIT_EVAL_KEY_FILE"]).read_text()
    key_line = next(ln for ln in text.splitlines() if not ln.startswith("#"))
    assert key_line.strip() not in msgspec.json.encode(run.report).decode()
    assert not run.report.ok


def test_calling_the_hidden_scorer_in_the_reward_is_blocked(redteam_runs: dict[str, Attempt]) -> None:
    run = redteam_runs["rubric_scorer"]
    assert run.check("env_import").ok and run.check("tasks").ok  # the env itself is fine ...
    rubric = run.check("rubric")
    assert not rubric.ok and "ModuleNotFoundError" in rubric.detail  # ... but its reward cannot reach families
    assert not run.report.ok


def test_lightly_edited_hidden_items_are_rejected_with_the_overlap_figure(redteam_runs: dict[str, Attempt]) -> None:
    run = redteam_runs["near_dup"]
    tasks = run.check("tasks")
    assert not tasks.ok
    assert "contamination: 10 of 50 tasks (20.00%) are near duplicates of hidden eval items" in tasks.detail
    assert not run.report.ok
