"""``ait worker`` and ``ait pod-agent`` refuse bad setups with a clear message and a non-zero status."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import main
from tests.cli.test_worker_faults import seed


def test_a_ladder_gpu_without_a_price_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path, "r", 1)
    code = main(["--runs-root", str(tmp_path), "worker", "r", "--once", "--ladder", "NVIDIA Imaginary 9000"])
    assert code == 2
    assert "no price for GPU type 'NVIDIA Imaginary 9000'" in capsys.readouterr().err


def test_an_unknown_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--runs-root", str(tmp_path), "worker", "nope", "--once"]) == 2
    assert "no run at 'nope'" in capsys.readouterr().err


def test_runpod_without_its_key_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(tmp_path, "r", 1)
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    argv = ["--runs-root", str(tmp_path), "worker", "r", "--provider", "runpod", "--image", "img"]
    code = main([*argv, "--trainer", "prime_rl", "--once"])
    assert code == 2 and "RUNPOD_API_KEY" in capsys.readouterr().err


def test_bad_fleet_flags_name_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path, "r", 1)
    assert main(["--runs-root", str(tmp_path), "worker", "r", "--once", "--max-pods", "0"]) == 2
    assert "max_pods" in capsys.readouterr().err


def test_an_empty_queue_drains_at_once_without_a_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path, "r", 0)
    assert main(["--runs-root", str(tmp_path), "worker", "r", "--once"]) == 0
    out = capsys.readouterr().out
    assert "on local subprocess pods" in out and "drained: 0 succeeded" in out
    assert not (tmp_path / ".local-pods").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--token-file", "/nonexistent/token"], "token file /nonexistent/token"),
        (["--token-env", "AIT_TEST_NO_SUCH_VAR"], "$AIT_TEST_NO_SUCH_VAR"),
        (["--token-env", "AIT_TEST_TOKEN", "--trainer", "nope"], "unknown trainer"),
    ],
)
def test_the_pod_agent_refuses_a_bad_setup(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIT_TEST_NO_SUCH_VAR", raising=False)
    monkeypatch.setenv("AIT_TEST_TOKEN", "t" * 20)
    code = main(["pod-agent", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "t" * 20 not in err


def test_the_simulated_provider_drains_a_queue_and_says_it_is_simulated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(tmp_path, "r", 3)
    assert main(["--runs-root", str(tmp_path), "worker", "r", "--provider", "sim", "--max-pods", "2", "--once"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "ait worker" in line]
    assert len(lines) == 2 and all(line.startswith("[SIMULATED] ") for line in lines)
    assert "drained: 3 succeeded" in lines[-1]
