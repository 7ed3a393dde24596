"""The warm probe's own guarantees: two children share nothing, a host that cannot fork confined children falls
back to the cold path and says so, and the semaphore caps how many probes run at once.

The red-team routes (keys, project, host sockets, fork bomb, memory, daemons, ...) are shown on the warm path by
the parametrized session fixtures (``probe_runs`` here, ``redteam_runs`` in ``tests/integrity``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.probe import ProbeLimits, ProbeValidator, _validator
from adapters.probe._warm import Zygote
from adapters.sandbox import IsolationPlan, detect_isolation
from families.spec import TaskSpec
from tests.adapters.warm_siblings import overlapped

from . import scenarios as sc

LIMITS = ProbeLimits(import_s=30, wall_s=60)

# Each child marks everything it can write, listens on an abstract unix socket (those live in the network
# namespace), waits until the other one has done the same, then looks for the other's traces.
_SIBLING = r"""
import json as _j, os as _o, socket as _so, time as _ti
_me, _other = __NAMES__
_r = {"t_marked": 0.0}
def _try(k, f):
    try:
        _r[k] = "OK:" + repr(f())[:300]
    except BaseException as e:
        _r[k] = "ERR:" + type(e).__name__
def _mark(d):
    with open(d + "/mark-" + _me, "w") as f:
        f.write("x")
    return _o.path.exists(d + "/mark-" + _me)
def _dial(name):
    s = _so.socket(_so.AF_UNIX, _so.SOCK_STREAM)
    try:
        s.connect("\0ait-warm-" + name)
        return "connected"
    finally:
        s.close()
_DIRS = ("/tmp", "/sandbox/home", "/dev/shm", "/dev")
for _d in _DIRS:
    _try("mark " + _d, lambda d=_d: _mark(d))
_srv = _so.socket(_so.AF_UNIX, _so.SOCK_STREAM)
_srv.bind("\0ait-warm-" + _me)
_srv.listen()
_try("own socket", lambda: _dial(_me))
_r["t_marked"] = _ti.time()
_ti.sleep(2.0)
_r["t_checked"] = _ti.time()
for _d in _DIRS:
    _try("sees other " + _d, lambda d=_d: _o.path.exists(d + "/mark-" + _other))
_try("other socket", lambda: _dial(_other))
_try("spool", lambda: _o.listdir("/sandbox/spool"))
_try("ws", lambda: sorted(_o.listdir("/sandbox/ws")))
_r["pids"] = sorted(int(p) for p in _o.listdir("/proc") if p.isdigit())
_r["pid"], _r["uid"] = _o.getpid(), _o.getuid()
_ti.sleep(2.0)  # still running (its marks still there) while the other one looks
_r["t_done"] = _ti.time()
raise RuntimeError("PROBE-RESULT " + _j.dumps(_r))
"""


def _sibling(tmp: Path, me: str, other: str) -> Path:
    code = _SIBLING.replace("__NAMES__", repr((me, other)))
    return sc.make_workspace(tmp, me, prelude=code, early=True)


@pytest.mark.slow
async def test_two_warm_children_share_nothing(tmp_path: Path, calc_spec: TaskSpec) -> None:
    validator = ProbeValidator(limits=LIMITS, preimport=False, path="warm")

    async def pair(attempt: int) -> dict[str, dict[str, Any]]:
        a, b = await asyncio.gather(
            validator.validate(_sibling(tmp_path / str(attempt), "alpha", "beta"), calc_spec, 1),
            validator.validate(_sibling(tmp_path / str(attempt), "beta", "alpha"), calc_spec, 1),
        )
        got: dict[str, dict[str, Any]] = {}
        for name, report in (("alpha", a), ("beta", b)):
            assert "+ warm path (" in report.isolation and "unavailable" not in report.isolation, report.isolation
            got[name] = sc.probe_result(next(c for c in report.checks if c.name == "env_import").detail)
        return got

    # The two start together, but on a busy machine one may reach its import seconds after the other: a pair that
    # did not overlap is run again (as tests/adapters/cpu_trainer/test_warm.py).
    for attempt in range(2):
        got = await pair(attempt)
        if overlapped(got):
            break
    assert overlapped(got), got  # the premise, twice missed: the run cannot say whether they share anything
    for mine in got.values():
        # The targets exist: each child wrote its own marks and served its own socket ...
        assert mine["mark /tmp"] == mine["mark /sandbox/home"] == "OK:True", mine
        assert mine["own socket"] == "OK:'connected'", mine
        for d in ("/tmp", "/sandbox/home", "/dev/shm", "/dev"):
            assert mine["sees other " + d] in ("OK:False", "ERR:PermissionError"), (d, mine)
        assert mine["other socket"].startswith("ERR:"), mine  # a network namespace of its own
        assert mine["spool"] in ("ERR:PermissionError", "OK:[]"), mine  # no other submission's copy
        assert mine["ws"] == "OK:['env', 'job.toml']", mine
        assert mine["pid"] == 2 and max(mine["pids"]) < 10, mine  # a pid namespace of its own
    if os.geteuid() == 0:
        assert got["alpha"]["uid"] != got["beta"]["uid"] and 0 not in (got["alpha"]["uid"], got["beta"]["uid"])


class _CappedZygote(Zygote):
    """A zygote without capabilities: its children cannot make namespaces (as on a host without root)."""

    def command(self) -> list[str]:
        args = super().command()
        return [args[0], "--cap-drop", "ALL", *args[1:]]


async def test_a_zygote_that_cannot_confine_falls_back_to_cold_and_says_so(
    tmp_path: Path, calc_spec: TaskSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    capped = _CappedZygote(detect_isolation(), Path(sys.executable))
    monkeypatch.setattr(_validator, "zygote_for", lambda plan, python: capped)
    ws = sc.make_workspace(tmp_path, "crash", prelude=sc.IMPORT_CRASH, early=True)
    try:
        report = await ProbeValidator(limits=LIMITS, preimport=False, path="warm").validate(ws, calc_spec, 1)
    finally:
        capped.close()
    iso = report.isolation
    assert iso.startswith("bwrap(") and "+ cold path (" in iso, iso
    assert "[warm unavailable: warm sandbox setup failed: [Errno 1] unshare: Operation not permitted]" in iso, iso
    check = next(c for c in report.checks if c.name == "env_import")
    assert not check.ok and "exit code 3" in check.detail  # the cold sandbox ran the submission


async def test_the_gate_caps_probes_running_at_once(
    tmp_path: Path, calc_spec: TaskSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = peak = 0

    async def sandboxed(self: ProbeValidator, *args: Any) -> tuple[str, list[Any]]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return "stand-in", []

    monkeypatch.setattr(ProbeValidator, "_sandboxed", sandboxed)
    validator = ProbeValidator(max_concurrent=2)
    reports = await asyncio.gather(*(validator.validate(sc.GOOD, calc_spec, 1) for _ in range(7)))
    assert [r.isolation for r in reports] == ["stand-in"] * 7
    assert peak == 2
    assert ProbeValidator().max_concurrent == max(2, os.cpu_count() or 2)


def test_the_isolation_line_names_the_path() -> None:
    plan = IsolationPlan(mode="bwrap", switch_uid=True, bwrap="/x/bwrap")
    warm = _validator.describe_isolation(plan, 61001, ProbeLimits(), 64, path="warm")
    cold = _validator.describe_isolation(plan, 61001, ProbeLimits(), 64, path="cold: no zygote here")
    assert "+ warm path (a fork of the probe's zygote" in warm and "unavailable" not in warm
    assert "+ cold path (a bubblewrap sandbox" in cold and cold.endswith("[warm unavailable: no zygote here]")
    assert json.dumps(warm)  # plain text, recorded as is in the report


def test_a_python_under_tmp_is_kept_visible_in_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clone (and its venv) under /tmp: the child's fresh /tmp would hide it and every package's metadata
    (seen in a CI clone at /tmp/ciclone: "No package metadata was found for verifiers"). The child keeps the
    outermost interpreter trees under /tmp and binds them back; trees elsewhere need nothing."""
    from adapters.probe import zygote

    monkeypatch.setattr(zygote.sys, "prefix", "/tmp/clone/.venv")
    monkeypatch.setattr(zygote.sys, "exec_prefix", "/tmp/clone/.venv")
    monkeypatch.setattr(zygote.sys, "base_prefix", "/tmp/py")
    monkeypatch.setattr(zygote.sys, "base_exec_prefix", "/tmp/py/lib/..")
    monkeypatch.setattr(zygote.sys, "executable", "/usr/bin/python3")
    assert zygote._trees_under_tmp() == ["/tmp/clone/.venv", "/tmp/py"]
    monkeypatch.setattr(zygote.sys, "prefix", "/opt/venv")
    monkeypatch.setattr(zygote.sys, "exec_prefix", "/opt/venv")
    monkeypatch.setattr(zygote.sys, "base_prefix", "/usr")
    monkeypatch.setattr(zygote.sys, "base_exec_prefix", "/usr")
    assert zygote._trees_under_tmp() == []
