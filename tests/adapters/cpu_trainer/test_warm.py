"""The warm training path: two jobs' forks of one zygote share nothing; a zygote that cannot confine falls back.

The red-team suite (``tests/integrity/test_redteam_cpu.py``) runs every attack route on both paths; here what
only the warm path has: siblings forked from one zygote at the same time, and the fallback. The jobs' envs end
at import (after their checks), so no training runs: what costs is the zygote's start-up, once for the module.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from adapters.sandbox import detect_isolation
from handlers.ports.inner_trainer import JobBundle, Progress
from tests.adapters.warm_siblings import overlapped

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")

ROOT = Path(__file__).resolve().parents[3]
REFERENCE_ENV = ROOT / "fixtures" / "envs" / "family_reference"

# Each child marks its /tmp and home and serves an abstract unix socket, waits until its sibling has done the
# same (a file the sibling cannot see is not proof: the two must overlap in time, checked from the stamps),
# then looks for the sibling's marks, socket, processes and job directory, and ends the import with its findings.
SIBLING = """
import json as _j, os as _os, socket as _so, sys as _sys, time as _t
_me, _other = __ME__, __OTHER__
_r = {"me": _me, "uid": _os.getuid(), "pids": sorted(int(p) for p in _os.listdir("/proc") if p.isdigit())}
for _d in ("/tmp", "/sandbox/home"):
    open(_os.path.join(_d, "mark-" + _me), "w").close()
    _r["mark " + _d] = _os.path.exists(_os.path.join(_d, "mark-" + _me))
_srv = _so.socket(_so.AF_UNIX, _so.SOCK_STREAM)
_srv.bind("\\0ait-sibling-" + _me)
_srv.listen(1)
_c = _so.socket(_so.AF_UNIX, _so.SOCK_STREAM)
_c.connect("\\0ait-sibling-" + _me)
_r["own socket"] = "connected"
_r["t_marked"] = _t.time()
_t.sleep(6.0)  # the sibling marks within this window (checked by the test from the stamps)
_r["t_checked"] = _t.time()
for _d in ("/tmp", "/sandbox/home", "/dev/shm"):
    try:
        _r["sees other " + _d] = _os.path.exists(_os.path.join(_d, "mark-" + _other))
    except OSError as _e:
        _r["sees other " + _d] = type(_e).__name__
try:
    _c2 = _so.socket(_so.AF_UNIX, _so.SOCK_STREAM)
    _c2.connect("\\0ait-sibling-" + _other)
    _r["other socket"] = "connected"
except OSError as _e:
    _r["other socket"] = "ERR:" + type(_e).__name__
try:
    _r["spool"] = _os.listdir("/sandbox/spool")
except OSError as _e:
    _r["spool"] = "ERR:" + type(_e).__name__
_r["sandbox"] = sorted(_os.listdir("/sandbox"))
_t.sleep(1.0)
_r["t_done"] = _t.time()
print("SIBLING " + _j.dumps(_r), file=_sys.stderr, flush=True)
raise RuntimeError("the sibling's checks are done")
"""


async def noop(p: Progress) -> None:
    return None


def sibling_bundle(tmp: Path, me: str, other: str) -> JobBundle:
    env = tmp / "env" / "family_reference"
    shutil.copytree(REFERENCE_ENV, env)
    init = env / "__init__.py"
    code = SIBLING.replace("__ME__", repr(me)).replace("__OTHER__", repr(other))
    head, future, rest = init.read_text().partition("from __future__ import annotations\n")
    init.write_text(head + future + code + rest)
    table = {"model": "tiny-0.6b", "learning_rate": 1e-5, "max_steps": 1, "batch_size": 2, "group_size": 2}
    lines = ["[prime_rl]", *(f"{k} = {json.dumps(v)}" for k, v in table.items()), "max_tokens = 8"]
    lines += ["", "[env]", 'id = "family-reference"', 'path = "env/family_reference"', "num_tasks = 4"]
    (tmp / "job.toml").write_text("\n".join(lines) + "\n")
    return JobBundle(job_id=f"sibling-{me}", family="calc_chain", root=str(tmp))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's work directory: the one zygote's spool."""
    from adapters.cpu_trainer._warm import close_zygotes

    yield tmp_path_factory.mktemp("warm-work")
    close_zygotes()


def _found(log: str) -> dict[str, Any]:
    assert "SIBLING " in log, log[-2000:]
    got: dict[str, Any] = json.loads(log.split("SIBLING ", 1)[1].splitlines()[0])
    return got


@pytest.mark.slow  # the zygote's start-up (torch, transformers, verifiers) is most of it: 40-70 s on 2 busy cores
def test_two_warm_children_share_nothing(tmp_path: Path, work: Path) -> None:
    from adapters.cpu_trainer import CpuTrainer

    trainer = CpuTrainer(eval_limit=1, work_root=work, child_path="warm")

    def pair(attempt: int) -> tuple[Any, Any, dict[str, dict[str, Any]]]:
        before = set(work.glob("ait-cpu-job-*"))

        async def both() -> list[Any]:
            return await asyncio.gather(
                trainer.run(sibling_bundle(tmp_path / f"alpha{attempt}", "alpha", "beta"), noop),
                trainer.run(sibling_bundle(tmp_path / f"beta{attempt}", "beta", "alpha"), noop),
            )

        a, b = asyncio.run(both())
        jobs = set(work.glob("ait-cpu-job-*")) - before
        assert len(jobs) == 2
        return a, b, {f["me"]: f for f in (_found((job / "child.log").read_text()) for job in jobs)}

    # The two children start together, but on a busy machine one may reach its env's import seconds after the
    # other (seen: 3.2 s, in a CI run of three workers on two cores): a pair that did not overlap is run again.
    for attempt in range(2):
        a, b, by_me = pair(attempt)
        assert set(by_me) == {"alpha", "beta"}, by_me
        if overlapped(by_me):
            break
    for result in (a, b):
        assert not result.ok and result.failure == "env_crash", (result.failure, result.detail)
    assert overlapped(by_me), by_me  # the premise, twice missed: the run cannot say whether they share anything
    for mine in by_me.values():
        # The targets exist: each child wrote its own marks and served its own socket ...
        assert mine["mark /tmp"] is True and mine["mark /sandbox/home"] is True, mine
        assert mine["own socket"] == "connected", mine
        for d in ("/tmp", "/sandbox/home", "/dev/shm"):
            assert mine["sees other " + d] in (False, "PermissionError"), (d, mine)
        assert mine["other socket"].startswith("ERR:"), mine  # a network namespace of its own
        assert mine["spool"] in ("ERR:PermissionError", []), mine  # no other job's directory
        assert {"base", "env", "out", "request.json"} <= set(mine["sandbox"]), mine
        assert max(mine["pids"]) < 10, mine  # a pid namespace of its own
    if os.geteuid() == 0:
        assert by_me["alpha"]["uid"] != by_me["beta"]["uid"] and 0 not in (by_me["alpha"]["uid"], by_me["beta"]["uid"])
    assert "the sibling's checks are done" in a.detail and "the sibling's checks are done" in b.detail


async def test_a_zygote_that_cannot_confine_falls_back_to_cold_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters.cpu_trainer import CpuTrainer, _trainer
    from adapters.cpu_trainer._warm import TrainZygote

    class Capped(TrainZygote):
        """No capabilities: its children cannot make namespaces (as on a host without root)."""

        def argv(self) -> list[str]:
            args = super().argv()
            return [args[0], "--cap-drop", "ALL", *args[1:]]

    capped = Capped(detect_isolation(), Path(sys.executable), tmp_path / "spool", 1)
    monkeypatch.setattr(_trainer, "zygote_for", lambda plan, spool, threads: capped)
    trainer = CpuTrainer(eval_limit=1, work_root=tmp_path / "work", child_path="warm")
    try:
        zygote, why = await trainer._zygote(detect_isolation())
    finally:
        capped.close()
    assert zygote is None
    assert why == "warm path unavailable: warm sandbox setup failed: [Errno 1] unshare: Operation not permitted", why


def test_the_isolation_line_names_the_path() -> None:
    from adapters.cpu_trainer._loop import TrainReport
    from adapters.cpu_trainer._supervise import ChildOutcome
    from adapters.cpu_trainer._trainer import isolation_line

    report = TrainReport(steps=[], stop_reason="max_steps", rollbacks=0, rollout_seconds=0.0, learn_seconds=0.0)
    base = ChildOutcome(
        report=report, weights=Path("w"), isolation="bwrap", note="", uid=61000, rlimits={}, setup_seconds=0.0,
        wall_seconds=0.0,
    )  # fmt: skip
    warm = isolation_line(msgspec.structs.replace(base, path="warm"))
    assert warm.startswith("training isolation: bwrap, uid 61000, ") and ", warm path (a confined fork" in warm
    cold = isolation_line(msgspec.structs.replace(base, path_note="warm path unavailable: no bubblewrap"))
    assert cold.endswith(", cold path (warm path unavailable: no bubblewrap)"), cold
