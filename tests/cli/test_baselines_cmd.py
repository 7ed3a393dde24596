"""`ait baselines`: the command wiring, with the CPU scorer replaced by a fake (the tiny models are slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main
from tests.fakes import fake_cpu_baselines


@pytest.fixture
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    return fake_cpu_baselines(monkeypatch, lambda model: 0.25 if "1.7B" in model else 0.125)


def test_freezes_every_pair_then_nothing(tmp_path: Path, fake_cpu: list, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cpu.json"
    argv = [
        "--runs-root",
        str(tmp_path / "runs"),
        "baselines",
        "--family",
        "calc_chain",
        "--family",
        "ledger",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert sorted(fake_cpu) == sorted(
        (f, m) for f in ("calc_chain", "ledger") for m in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")
    )
    text = capsys.readouterr()
    assert "cpu: tiny Qwen3-architecture checkpoints" in text.err
    assert "calc_chain" in text.out and "best_pre=0.250" in text.out
    data = json.loads(out.read_text())
    assert data["version"] == 1 and data["scores"]["ledger"]["Qwen/Qwen3-0.6B"]["score"] == 0.125
    events = (tmp_path / "runs" / "baselines" / "events.jsonl").read_text().splitlines()
    assert len(events) == 4 and all("baseline.frozen" in e for e in events)
    assert main(argv) == 0 and len(fake_cpu) == 4  # frozen: not scored again
    assert json.loads(out.read_text())["version"] == 1


def test_unknown_names_and_missing_gpu_tools_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--runs-root", str(tmp_path), "baselines", "--out", str(tmp_path / "x.json")]
    assert main([*base, "--family", "nope"]) == 2
    assert "unknown family or model ['nope']" in capsys.readouterr().err
    assert main([*base, "--inner", "gpu", "--vllm", "/nonexistent/vllm"]) == 2
    assert "run it on a GPU pod" in capsys.readouterr().err


@pytest.mark.slow
def test_the_real_scorer_prints_the_bar_and_summary_without_the_libraries_bars(
    tmp_path: Path,
) -> None:
    # Fresh processes, the real tiny scorer on one task: the libraries' progress settings are process-wide.
    import os
    import subprocess
    import sys

    # Without what quiet_libraries sets in os.environ: an in-process `ait` command earlier on this worker sets it.
    quieting = {"HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TQDM_DISABLE"}
    env = {k: v for k, v in os.environ.items() if k not in quieting}

    def run(*flags: str) -> str:
        argv = [sys.executable, "-m", "cli", *flags, "--runs-root", str(tmp_path / "runs"), "baselines"]
        argv += ["--inner", "cpu", "--family", "calc_chain", "--model", "Qwen/Qwen3-0.6B", "--limit", "1", "--force"]
        argv += ["--out", str(tmp_path / "cpu.json")]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "best_pre=" in done.stdout, done.stdout
        return done.stderr

    # The premise: transformers does draw its bar while loading the checkpoint (-v shows it).
    loud = run("-v")
    assert "Loading weights" in loud, loud[-2000:]
    quiet = run()
    assert "Loading weights" not in quiet and "[debug" not in quiet, quiet[-2000:]
    assert "pairs to score" in quiet
