"""adapters.prime_rl.selfcheck: the pod's self-check passes on the pinned stack and names each missing piece."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from adapters.prime_rl import pins
from adapters.prime_rl.selfcheck import BOOTSTRAP_LOG, BOOTSTRAP_STATUS, head_commit, prime_rl_self_check
from tests.fakes.gpu_stack import make_stack

ALL = ["gpu", "prime_rl_commit", "prime_rl_import", "vllm", "scoring"]


def check(root: Path, path: str, **kw: object) -> tuple[str, dict[str, tuple[bool, str]]]:
    result = prime_rl_self_check(str(root), env={"PATH": path}, **kw)  # type: ignore[arg-type]
    return result.state, {i.name: (i.ok, i.detail) for i in result.items}


def test_the_pinned_stack_passes_every_check(tmp_path: Path) -> None:
    path = make_stack(tmp_path, gpus=2)
    state, items = check(tmp_path, path, min_gpus=2, expected_ait=version("ai-trains-ai"))
    assert state == "passed", items
    assert list(items) == ["ait", *ALL]
    assert items["gpu"] == (True, "2 x NVIDIA H100 80GB HBM3")
    assert items["prime_rl_commit"] == (True, f"{pins.PRIME_RL_COMMIT[:12]} ({pins.PRIME_RL_DESCRIBE})")
    assert items["vllm"] == (True, pins.VLLM_VERSION)


@pytest.mark.parametrize(
    ("stack", "failed", "says"),
    [
        ({"gpus": -1}, ["gpu"], "nvidia-smi not found"),
        ({"gpus": 0}, ["gpu"], "0 GPU(s) visible, the trainer needs 1"),
        ({"commit": "f" * 40}, ["prime_rl_commit"], f"ffffffffffff checked out, pinned {pins.PRIME_RL_COMMIT[:12]}"),
        ({"vllm": "0.25.1"}, ["vllm"], f"0.25.1 installed, pinned {pins.VLLM_VERSION}"),
        (
            {"import_error": "ModuleNotFoundError: No module named 'prime_rl'"},
            ["prime_rl_import", "vllm"],
            "No module named 'prime_rl'",
        ),
        ({"scoring": False}, ["scoring"], "score-venv/bin/vf-eval"),
    ],
)
def test_each_missing_piece_is_named(tmp_path: Path, stack: dict[str, object], failed: list[str], says: str) -> None:
    path = make_stack(tmp_path, **stack)  # type: ignore[arg-type]
    state, items = check(tmp_path, path)
    assert state == "failed"
    assert [name for name, (ok, _) in items.items() if not ok] == failed
    assert says in items[failed[0]][1]
    assert all(ok for name, (ok, _) in items.items() if name not in failed)


def test_no_checkout_and_another_ait_version_are_named(tmp_path: Path) -> None:
    path = make_stack(tmp_path / "elsewhere")  # the root checked has nothing
    state, items = check(tmp_path, path, expected_ait="9.9.9")
    assert state == "failed"
    assert items["ait"] == (False, f"{version('ai-trains-ai')} here, the controller runs 9.9.9")
    assert items["prime_rl_commit"][1] == f"no prime-rl checkout at {tmp_path}/prime-rl"
    assert items["prime_rl_import"][1].startswith("no venv at")


def test_a_failed_bootstrap_is_reported_with_its_last_log_line(tmp_path: Path) -> None:
    path = make_stack(tmp_path)
    (tmp_path / BOOTSTRAP_STATUS).write_text("128\n")
    (tmp_path / BOOTSTRAP_LOG).write_text("cloning...\nfatal: unable to access 'https://github.com/...'\n")
    state, items = check(tmp_path, path)
    assert state == "failed"
    ok, detail = items["bootstrap"]
    assert not ok and detail.startswith("exit 128: fatal: unable to access")
    (tmp_path / BOOTSTRAP_STATUS).write_text("0\n")
    assert check(tmp_path, path)[0] == "passed"


def test_head_commit_follows_branches_packed_refs_and_real_git(tmp_path: Path) -> None:
    sha = "a" * 40
    (tmp_path / "c" / ".git" / "refs" / "heads").mkdir(parents=True)
    (tmp_path / "c" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "c" / ".git" / "packed-refs").write_text(f"# pack-refs\n{sha} refs/heads/main\n")
    assert head_commit(tmp_path / "c") == sha
    (tmp_path / "c" / ".git" / "refs" / "heads" / "main").write_text("b" * 40 + "\n")  # loose wins
    assert head_commit(tmp_path / "c") == "b" * 40
    repo = tmp_path / "real"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    real = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert head_commit(repo) == real
    assert head_commit(tmp_path / "none") == ""
