"""Hostile env packages: each attack is contained, reported in the checks, and the engine process is unharmed.

The scenarios run once per session (``conftest.probe_runs``); the engine side of each attack (a fake API key
in this process's environment, a TCP service on the host's loopback, files outside the sandbox) is set up
there. The exfiltration env tries every route at import time and raises what it achieved, so each
route is asserted separately here.
"""

from __future__ import annotations

import os
import re

import msgspec
import pytest

from .conftest import Run
from .scenarios import FAKE_KEY, probe_result

pytestmark = pytest.mark.slow


def _outcomes(run: Run) -> dict[str, str]:
    check = run.check("env_import")
    assert not check.ok
    return probe_result(check.detail)


def _sandbox_uid(run: Run) -> int:
    match = re.search(r"\buid (\d+)\b", run.report.isolation)
    assert match, run.report.isolation
    return int(match.group(1))


def test_bwrap_isolation_is_reported(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["exfil"]
    iso = run.report.isolation
    assert iso.startswith("bwrap(")
    assert "net+pid" in iso and "rlimits(" in iso and "scrubbed env" in iso
    assert f"+ {run.context['path']} path (" in iso and "unavailable" not in iso  # the path asked for ran


def test_network_is_unreachable_from_the_sandbox(probe_runs: dict[str, Run]) -> None:
    got = _outcomes(probe_runs["exfil"])
    assert got["internet"].startswith("ERR:"), got["internet"]
    assert "Network is unreachable" in got["internet"]


def test_host_loopback_services_are_not_reachable(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["exfil"]
    got = _outcomes(run)
    assert got["host_loopback"].startswith("ERR:"), got["host_loopback"]
    assert run.context["host"].connections == 0  # the engine-side service never saw a connection


def test_writes_outside_the_sandbox_fail(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["exfil"]
    got = _outcomes(run)
    assert got["write_outside"].startswith("ERR:") and got["write_original_ws"].startswith("ERR:")
    assert not (run.context["host"].outside / "exfil").exists()
    assert not (run.workspace / "pwned.txt").exists()  # the real workspace is untouched too


def test_engine_secrets_never_reach_the_child_or_the_report(probe_runs: dict[str, Run]) -> None:
    got = _outcomes(probe_runs["exfil"])
    assert got["env_key"] == "ERR:KeyError:'OPENAI_API_KEY'"
    assert "OPENAI_API_KEY" not in got["env_names"]
    assert not got["proc1_environ"].startswith("OK:") or FAKE_KEY not in got["proc1_environ"]
    for run in probe_runs.values():
        encoded = msgspec.json.encode(run.report).decode()
        assert FAKE_KEY not in encoded
        assert "OPENAI_API_KEY redacted" not in encoded  # nothing leaked that redaction had to hide


def test_engine_files_keys_and_project_are_invisible(probe_runs: dict[str, Run]) -> None:
    got = _outcomes(probe_runs["exfil"])
    assert got["read_key"].startswith("ERR:FileNotFoundError"), got["read_key"]
    assert got["read_rundir"].startswith("ERR:FileNotFoundError"), got["read_rundir"]
    assert got["import_families"].startswith("ERR:ModuleNotFoundError"), got["import_families"]
    assert got["read_project"].startswith("ERR:FileNotFoundError"), got["read_project"]


def test_file_size_limit_applies(probe_runs: dict[str, Run]) -> None:
    assert "File too large" in _outcomes(probe_runs["exfil"])["big_file"]


def test_child_runs_as_an_unprivileged_uid(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["exfil"]
    got = _outcomes(run)
    if os.geteuid() != 0:  # not root: the child keeps the engine's own, unprivileged uid
        assert got["uid"] == f"OK:{os.geteuid()}" and "same uid as the engine" in run.report.isolation
        return
    assert got["uid"] == f"OK:{_sandbox_uid(run)}"
    assert _sandbox_uid(run) != 0
    assert got["caps"] == "OK:['0000000000000000', '1']"  # no capabilities; setuid binaries cannot elevate


def test_static_scan_flags_the_literal_paths(probe_runs: dict[str, Run]) -> None:
    check = probe_runs["exfil"].check("static_scan")
    assert not check.ok
    assert "env/calc_chain_train/__init__.py:" in check.detail and "/proc/1/environ" in check.detail


def test_fork_bomb_is_bounded_and_killed(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["fork_bomb"]
    check = run.check("env_import")
    assert not check.ok and "timed out" in check.detail and "killed" in check.detail
    assert run.seconds < 30
    if os.geteuid() == 0:
        uid = _sandbox_uid(run)
        left = [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) == uid]
        assert left == [], f"processes of the sandbox uid {uid} survived: {left}"


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_memory_hog_gets_a_memory_error(probe_runs: dict[str, Run]) -> None:
    check = probe_runs["memory_hog"].check("env_import")
    assert not check.ok and "MemoryError" in check.detail
    assert "env/calc_chain_train/__init__.py:" in check.detail  # the agent's own line is named


def test_import_time_infinite_loop_times_out(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["import_loop"]
    check = run.check("env_import")
    assert not check.ok and "timed out after 6 s while importing" in check.detail
    assert all(not run.check(n).ok and "not run" in run.check(n).detail for n in ("tasks", "tools", "rubric"))


def test_reward_time_infinite_loop_times_out(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["reward_loop"]
    assert run.check("env_import").ok and run.check("tasks").ok and run.check("tools").ok
    rubric = run.check("rubric")
    assert not rubric.ok and "timed out" in rubric.detail and "reward" in rubric.detail


def test_import_time_crash_is_reported(probe_runs: dict[str, Run]) -> None:
    check = probe_runs["crash"].check("env_import")
    assert not check.ok and "died" in check.detail and "exit code 3" in check.detail


def test_engine_process_is_unharmed(probe_runs: dict[str, Run]) -> None:
    assert len(probe_runs) == 13  # every scenario came back with a report, none raised
    ours = [pid for pid in os.listdir("/proc") if pid.isdigit() and _parent(pid) == os.getpid()]
    assert not [pid for pid in ours if _is_sandbox(pid)], "a sandbox process of this engine survived"
    if os.geteuid() == 0:
        found = (re.search(r"\buid (\d+)\b", run.report.isolation) for run in probe_runs.values())
        uids = {int(m.group(1)) for m in found if m}
        assert uids and not [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) in uids]


def _parent(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _is_sandbox(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    if b"zygote.py" in cmd or b"cpu_trainer._zygote" in cmd:  # the warm zygotes (probe, CPU trainer) live as
        return False  # long as the process that started them, by design
    return b"bwrap" in cmd or b"driver.py" in cmd or b"unshare" in cmd


def test_weaker_isolation_is_said_and_still_blocks_network_and_secrets(probe_runs: dict[str, Run]) -> None:
    run = probe_runs["exfil_unshare"]
    iso = run.report.isolation
    assert iso.startswith("unshare(") and "NO filesystem confinement" in iso
    assert iso.endswith("[UNSAFE: run without a sandbox by explicit opt-in]")
    got = _outcomes(run)
    assert got["internet"].startswith("ERR:") and got["host_loopback"].startswith("ERR:")
    assert got["env_key"].startswith("ERR:KeyError")
    assert got["read_project"].startswith("OK:")  # what bubblewrap prevents, and what "NO filesystem" warns of
