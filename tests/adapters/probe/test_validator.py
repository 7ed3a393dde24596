"""The probe's checks end to end: the good env passes every one, each targeted bad env fails its own.

Sandboxed runs come from the session fixture ``probe_runs``; runs that stop before the sandbox (an
unparseable job.toml, a missing env directory) are cheap and run here.
"""

from __future__ import annotations

import msgspec
import pytest

from adapters.probe import CHECK_NAMES, ProbeValidator
from families.spec import TaskSpec
from handlers.ports.validator import nudge

from . import scenarios as sc
from .conftest import Run

GOOD_JOB = (sc.GOOD / "job.toml").read_text()


@pytest.mark.slow
def test_good_env_passes_every_check_in_order(probe_runs: dict[str, Run]) -> None:
    report = probe_runs["good"].report
    assert [c.name for c in report.checks] == list(CHECK_NAMES)
    assert report.ok, [c for c in report.checks if not c.ok]
    assert report.parseable and report.seconds > 0
    rubric = next(c for c in report.checks if c.name == "rubric")
    assert "6 with the reference tool calls" in rubric.detail  # gold rollouts made the family's tool calls
    assert report.isolation


@pytest.mark.slow
def test_project_import_fails_static_scan_and_import(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["imports_families"]
    static = run.check("static_scan")
    assert not static.ok and "env/calc_chain_train/__init__.py:10: imports 'families'" in static.detail
    imp = run.check("env_import")
    assert not imp.ok and "No module named 'families'" in imp.detail  # the sandbox, not just the scan
    assert not run.check("prime_rl_config").ok


@pytest.mark.slow
def test_two_tasksets_fail_env_import(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["two_tasksets"]
    assert run.check("job_config").ok and run.check("static_scan").ok
    check = run.check("env_import")
    assert not check.ok and "exports 2 Taskset subclasses" in check.detail


@pytest.mark.slow
def test_hidden_eval_items_and_too_few_tasks_fail_tasks(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["hidden_tasks"]
    assert run.check("env_import").ok
    check = run.check("tasks")
    assert not check.ok
    assert "at least 32 are needed" in check.detail
    assert "3 of 3 tasks equal items of the hidden eval set" in check.detail


@pytest.mark.slow
def test_prefixed_tool_names_fail_tools_with_a_hint(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["prefixed_tools"]
    check = run.check("tools")
    assert not check.ok
    assert "missing tool(s) ['add', 'sub', 'mul', 'div']" in check.detail and "TOOL_PREFIX = None" in check.detail
    assert run.check("tasks").ok


@pytest.mark.slow
def test_constant_reward_fails_rubric(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["constant_reward"]
    check = run.check("rubric")
    assert not check.ok and "cannot tell a correct answer from a wrong one" in check.detail
    assert all(run.check(n).ok for n in ("env_import", "tasks", "tools", "prime_rl_config"))


@pytest.mark.slow
def test_only_the_targeted_check_fails(probe_runs: dict[str, Run]) -> None:
    targeted = {
        "two_tasksets": {"env_import", "tasks", "tools", "rubric", "prime_rl_config"},
        "prefixed_tools": {"tools"},
        "constant_reward": {"rubric"},
        "reward_loop": {"rubric"},
    }
    for name, expected in targeted.items():
        failed = {c.name for c in probe_runs[name].report.checks if not c.ok}
        assert failed == expected, (name, failed)


async def test_unparseable_job_stops_before_the_sandbox(tmp_path, calc_spec: TaskSpec) -> None:
    ws = sc.make_workspace(tmp_path, "bad_job", job="[prime_rl\nmodel = 1\n")
    report = await ProbeValidator().validate(ws, calc_spec, 2)
    assert not report.ok and not report.parseable
    assert [c.name for c in report.checks] == list(CHECK_NAMES)
    job = report.checks[0]
    assert not job.ok and "job.toml:1: not valid TOML" in job.detail  # names the line
    assert all("not run: job.toml must parse first" in c.detail for c in report.checks[2:])
    assert [c.name for c in report.checks if not c.ran] == list(CHECK_NAMES[2:])
    assert report.isolation == ""  # nothing ran in a sandbox
    assert report.seconds < 5
    # The agent's reply names the mistake once and the checks it held back on one line (not one entry each).
    reply = nudge(report, 1, 2).splitlines()
    assert reply[1].startswith("- job_config: ") and not any(line.startswith("- env_import") for line in reply)
    assert "Not run until those pass: env_import, tasks, tools, rubric, prime_rl_config." in reply
    # With no parseable job.toml the env path is the default's guess: where that is not a directory (the replica's
    # envs/<name> layout), the scan is not run either, not a second rejection.
    (ws / "env").rename(ws / "envs")
    report = await ProbeValidator().validate(ws, calc_spec, 2)
    assert [c.name for c in report.checks if not c.ran] == list(CHECK_NAMES[1:])
    assert nudge(report, 1, 2).splitlines()[1:3] == [
        report.checks[0].detail.join(("- job_config: ", "")),
        "Not run until those pass: static_scan, env_import, tasks, tools, rubric, prime_rl_config.",
    ]


async def test_out_of_bounds_job_and_missing_env_dir_are_reported_together(tmp_path, calc_spec: TaskSpec) -> None:
    job = GOOD_JOB.replace("learning_rate = 1e-5", "learning_rate = 0.5").replace('path = "env"', 'path = "nowhere"')
    ws = sc.make_workspace(tmp_path, "oob", job=job)
    report = await ProbeValidator().validate(ws, calc_spec, 1)
    by_name = {c.name: c for c in report.checks}
    assert report.parseable and not report.ok
    assert "[prime_rl].learning_rate = 0.5" in by_name["job_config"].detail
    assert "[env].path 'nowhere': no such directory" in by_name["static_scan"].detail
    assert "not run" in by_name["env_import"].detail


async def test_env_path_escaping_the_workspace_is_refused(tmp_path, calc_spec: TaskSpec) -> None:
    ws = sc.make_workspace(tmp_path, "escape", job=GOOD_JOB.replace('path = "env"', 'path = "../.."'))
    report = await ProbeValidator().validate(ws, calc_spec, 1)
    static = next(c for c in report.checks if c.name == "static_scan")
    assert not static.ok and "must be a relative directory inside the workspace" in static.detail


@pytest.mark.slow
def test_report_round_trips_through_msgspec(probe_runs: dict[str, Run]) -> None:
    report = probe_runs["good"].report
    encoded = msgspec.json.encode(report)
    assert msgspec.json.decode(encoded, type=type(report)) == report
