"""What the CPU trainer's training child is given: its command line, environment and files, per isolation.

No child runs here (the red-team suite in tests/integrity/test_redteam_cpu.py runs real ones): these check
the confinement as built, fast.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.cpu_trainer._confine import make_root, prepare_launch
from adapters.probe import IsolationPlan
from families import EVAL_KEY_ENV as ENV_VAR
from families import EVAL_KEY_SEAL_ENV as SEAL_VAR

ROOT = Path(__file__).resolve().parents[3]
CKPT = ROOT / "fixtures" / "tiny" / "tiny-0.6b"
ENV = ROOT / "fixtures" / "envs" / "reward_everything"


def binds(argv: list[str]) -> dict[str, tuple[str, str]]:
    """bubblewrap's binds: destination -> (flag, source)."""
    out = {}
    for i, arg in enumerate(argv):
        if arg in ("--bind", "--ro-bind", "--bind-try", "--ro-bind-try"):
            out[argv[i + 2]] = (arg, argv[i + 1])
    return out


def test_under_bubblewrap_only_code_copies_and_its_output_are_mounted(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    launch = prepare_launch(IsolationPlan(mode="bwrap", switch_uid=False), root, ENV, CKPT, threads=2)
    mounts = binds(launch.argv)
    writable = sorted(dest for dest, (flag, _) in mounts.items() if not flag.startswith("--ro"))
    assert writable == ["/sandbox/out"]
    sources = {src for _, src in mounts.values()}
    assert str(ROOT) not in sources and str(CKPT) not in sources  # not the tree, nor the original checkpoint
    assert {f"/sandbox/code/{p}" for p in ("adapters", "families", "handlers", "events", "engine")} <= set(mounts)
    assert not any("eval" in src and src.endswith(".key") for src in sources)
    setenv = {launch.argv[i + 1]: launch.argv[i + 2] for i, a in enumerate(launch.argv) if a == "--setenv"}
    assert setenv[SEAL_VAR] == "1" and ENV_VAR not in setenv and setenv["OMP_NUM_THREADS"] == "2"
    assert "--clearenv" in launch.argv and "--unshare-net" in launch.argv
    assert (root / "base" / "model.safetensors").is_file() and (root / "env" / "reward_everything").is_dir()


def test_without_namespaces_the_child_gets_a_scrubbed_environment_and_says_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    root = make_root(tmp_path)
    launch = prepare_launch(IsolationPlan(mode="none", switch_uid=False), root, ENV, CKPT, threads=1)
    assert launch.isolation == "none" and "engine's own user" in launch.note
    assert launch.env[SEAL_VAR] == "1"
    assert ENV_VAR not in launch.env and "OPENAI_API_KEY" not in launch.env
    assert launch.inside_out == str(root / "out") and launch.uid is None
    assert "RLIMIT_NPROC" not in launch.rlimits  # only meaningful on a uid of the child's own


@pytest.mark.skipif(os.geteuid() != 0, reason="switching uid needs root")
def test_as_root_the_child_drops_to_a_uid_of_its_own_that_owns_only_its_output() -> None:
    root = make_root(None)
    try:
        launch = prepare_launch(IsolationPlan(mode="bwrap", switch_uid=True), root, ENV, CKPT, threads=1)
        assert launch.uid is not None and launch.uid >= 61000
        assert (root / "out").stat().st_uid == launch.uid and (root / "home").stat().st_uid == launch.uid
        assert (root / "env").stat().st_uid == 0 and (root / "base").stat().st_uid == 0
        assert launch.rlimits["RLIMIT_NPROC"] > 0
    finally:
        import shutil

        shutil.rmtree(root)


def test_the_warm_zygote_gets_the_cold_childs_confinement_with_the_spool_instead_of_one_job(tmp_path: Path) -> None:
    from adapters.cpu_trainer._confine import ChildLimits, zygote_argv

    plan = IsolationPlan(mode="bwrap", switch_uid=False)
    cold = prepare_launch(plan, make_root(tmp_path), ENV, CKPT, threads=1).argv
    warm = zygote_argv(
        plan, tmp_path / "spool", threads=1, limits=ChildLimits(), python=Path(cold[cold.index("--") + 1])
    )
    cold_mounts, warm_mounts = binds(cold), binds(warm)
    per_job = {"/sandbox/base", "/sandbox/env", "/sandbox/request.json", "/sandbox/out"}
    shared = {d: m for d, m in cold_mounts.items() if d not in per_job}
    assert shared and all(warm_mounts[d] == m for d, m in shared.items())  # the same system, Python and code
    assert warm_mounts["/sandbox/spool"] == ("--bind", str(tmp_path / "spool"))  # the only addition
    assert warm_mounts["/sandbox/request.json"] == ("--ro-bind", "/dev/null")  # a mount point for each child's
    assert set(warm_mounts) - set(cold_mounts) == {"/sandbox/spool"}
    writable = sorted(d for d, (flag, _) in warm_mounts.items() if not flag.startswith("--ro"))
    assert writable == ["/sandbox/spool"]
    assert not any(str(ROOT) == src or (src.endswith(".key") and "eval" in src) for _, src in warm_mounts.values())

    def setenv(argv: list[str]) -> dict[str, str]:
        return {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}

    assert setenv(warm) == setenv(cold) and setenv(warm)[SEAL_VAR] == "1" and ENV_VAR not in setenv(warm)
    cut = cold.index("--")  # the options before the command: namespaces, clearenv, die-with-parent, tmpfs ...
    flags = {a for a in cold[:cut] if a.startswith("--") and a not in ("--bind", "--ro-bind", "--chdir")}
    assert flags <= set(warm[: warm.index("--")])
    assert "cpu_trainer._zygote" in warm[-1]
