"""Red team, env routes through the real validation probe: each is reached without the sandbox and stopped in it.

Each route test first asserts that the control run (the same code as a plain child of the engine, no
sandbox) reached its target, then that the run inside the probe did not. What a stopped route leaves behind
is a rejected submission (``submission.rejected`` carries these checks), so no job runs and no score is
recorded from it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec
import pytest

from families import get_family, hidden_tasks

from .attack import ROUTES, contained, reached
from .conftest import Attempt, Hostile

PROBE_NPROC = 64  # ProbeLimits.nproc


@pytest.fixture(scope="module")
def hidden_prompt() -> str:
    return hidden_tasks(get_family("calc_chain"))[0].prompt


@pytest.mark.parametrize("route", ROUTES)
def test_route_is_reachable_without_the_sandbox_and_stopped_in_the_probe(
    route: str, hostile: Hostile, redteam_runs: dict[str, Attempt], hidden_prompt: str
) -> None:
    assert reached(route, hostile.control, hidden_prompt), (route, hostile.control.got[route])
    seen = redteam_runs["hostile"].seen
    assert seen is not None and seen.got, redteam_runs["hostile"].check("env_import").detail
    assert contained(route, seen, hidden_prompt, nproc=PROBE_NPROC), (route, seen.got[route], seen.written)


def test_the_hostile_env_runs_as_an_unprivileged_uid_under_bubblewrap(redteam_runs: dict[str, Attempt]) -> None:
    run = redteam_runs["hostile"]
    iso = run.report.isolation
    assert iso.startswith("bwrap(") and "UNSAFE" not in iso and "weaker" not in iso, iso
    assert f"+ {run.path} path (" in iso and "unavailable" not in iso, iso  # the path asked for is the one that ran
    if os.geteuid() == 0:
        match = re.search(r"\buid (\d+)\b", iso)
        assert match and int(match.group(1)) != 0, iso
        uid = int(match.group(1))
        left = [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) == uid]
        assert left == [], f"processes of the sandbox uid {uid} survived (the setsid daemon?): {left}"
    assert not run.report.ok and not run.check("env_import").ok


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_the_key_never_reaches_the_report(redteam_runs: dict[str, Attempt]) -> None:
    text = Path(os.environ["AIT_EVAL_KEY_FILE"]).read_text()
    key_line = next(ln for ln in text.splitlines() if not ln.startswith("#"))
    assert key_line.strip()
    for run in redteam_runs.values():
        assert key_line.strip() not in msgspec.json.encode(run.report).decode()


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
