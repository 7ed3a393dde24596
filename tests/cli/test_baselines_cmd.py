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
