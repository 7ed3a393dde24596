"""One writer per run, end to end: while ``ait train`` (or ``ait episode``) writes a run in another process, a second
writer on it (``ait worker``, ``ait resume``, ``ait episode``) is refused at once with one line naming the run and
the holder's pid (exit 2) and the log stays intact; once the holder is SIGKILLed the next writer starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import main
from engine.log import read_log
from engine.logs import reset_logging
from engine.writer_lock import lock_holder
from events import RunStarted
from tests.cli.train_digest import duplicates

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"
TASK = ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json"


def _spawn(runs: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "--runs-root", str(runs), *args],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_holding(proc: subprocess.Popen[str], run: Path, timeout: float = 90.0) -> None:
    """Until ``proc`` holds the run's writer lock and its log has its header."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the holder exited early ({proc.returncode})"
        events = run / "events.jsonl"
        if lock_holder(run) == proc.pid and events.exists():
            records = read_log(events).records
            if records and isinstance(records[0].event, RunStarted):
                return
        time.sleep(0.05)
    raise AssertionError("the holder never took the run's writer lock")


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], run_id: str, pid: int) -> None:
    try:
        code = main(argv)
    finally:
        reset_logging()
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert f"run {run_id} " in err and f"process {pid}" in err and "one writer per run" in err


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stderr is not None:
            p.stderr.close()


@pytest.mark.slow
def test_train_holds_the_run_worker_and_resume_are_refused_and_a_sigkill_frees_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], procs: list[subprocess.Popen[str]]
) -> None:
    runs = tmp_path / "runs"
    # A slower stand-in so that the writer is still running when the others try.
    config = tmp_path / "slow.toml"
    config.write_text(
        SMOKE.read_text().replace('step_s = "0.01"', 'step_s = "1.0"').replace("max_steps = 2", "max_steps = 3")
    )
    train = _spawn(runs, "train", "--config", str(config), "--run-id", "race")
    procs.append(train)
    run = runs / "race"
    _wait_holding(train, run)
    # Held still while the others try: under load this process can lose the CPU for longer than the stand-in's
    # steps, and a holder that has finished holds nothing.
    train.send_signal(signal.SIGSTOP)

    _refused(capsys, ["--runs-root", str(runs), "worker", "race", "--provider", "local", "--once"], "race", train.pid)
    _refused(capsys, ["--runs-root", str(runs), "resume", "race"], "race", train.pid)
    _refused(
        capsys,
        ["--runs-root", str(runs), "episode", "--task", str(TASK), "--run-id", "race", "--no-job"],
        "race",
        train.pid,
    )
    # Readers take no lock: they work while the writer runs.
    assert main(["--runs-root", str(runs), "tail", "race"]) == 0
    assert main(["--runs-root", str(runs), "replay", "race"]) == 0
    capsys.readouterr()
    # The refused writers wrote nothing: the holder's log is whole (gap-free, every crc).
    before = len(read_log(run / "events.jsonl").records)
    assert train.poll() is None, "the holder finished before it could be killed"

    train.send_signal(signal.SIGKILL)
    assert train.wait(timeout=30) == -signal.SIGKILL
    assert lock_holder(run) is None  # the kernel let go of the dead holder's lock: nothing stale to clear
    assert len(read_log(run / "events.jsonl").records) >= before

    # The next writer starts and finishes the run; the log replays and verifies.
    try:
        assert main(["--runs-root", str(runs), "resume", "race", "--max-steps", "1"]) == 0, capsys.readouterr().err
    finally:
        reset_logging()
    capsys.readouterr()
    assert main(["--runs-root", str(runs), "replay", "race", "--verify"]) == 0
    assert "0 differ" in capsys.readouterr().out
    assert duplicates(run) == []


@pytest.mark.slow
def test_two_episodes_on_one_run_the_second_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], procs: list[subprocess.Popen[str]]
) -> None:
    runs = tmp_path / "runs"
    first = _spawn(runs, "episode", "--task", str(TASK), "--run-id", "ep", "--no-job")
    procs.append(first)
    _wait_holding(first, runs / "ep")
    # Held still while the second one tries: a --no-job episode on a quiet machine can finish (and let go of the
    # run) within seconds, and on a busy one this process may not get the CPU for that long.
    first.send_signal(signal.SIGSTOP)
    _refused(
        capsys,
        ["--runs-root", str(runs), "episode", "--task", str(TASK), "--run-id", "ep", "--no-job"],
        "ep",
        first.pid,
    )
    # No need to wait for its probe: stop the holder where it is; what it wrote replays and verifies.
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert lock_holder(runs / "ep") is None
    assert main(["--runs-root", str(runs), "replay", "ep", "--verify"]) == 0
    assert "0 differ" in capsys.readouterr().out
