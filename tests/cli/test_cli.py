"""The `ait` entry point: replay and tail on a real run directory, through the console script's main()."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from cli import main
from engine.runtime import Runtime
from events import JobQueued, RunStarted


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "demo"

    async def write() -> None:
        async with Runtime(run, []) as rt:
            await rt.emit(RunStarted(run_id="demo", seed=1, code_version="t"))
            await rt.emit(JobQueued(job_id="j1", episode_id="e1", family="calc_chain", base_model="m", bundle="b"))

    anyio.run(write)
    return run


def test_replay_prints_summary_and_hash(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--runs-root", str(run_dir.parent), "replay", "demo"]) == 0
    out = capsys.readouterr().out
    assert "events     2 (last seq 1)" in out
    assert "job.queued" in out
    assert main(["replay", str(run_dir), "--hash-only"]) == 0
    digest = capsys.readouterr().out.strip()
    assert len(digest) == 64 and digest in out


def test_tail_filters_and_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tail", str(run_dir / "events.jsonl"), "--type", "job"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "job.queued" in lines[0] and "job_id=j1" in lines[0]
    assert main(["tail", str(run_dir), "--json"]) == 0
    raw = capsys.readouterr().out.splitlines()
    assert raw == (run_dir / "events.jsonl").read_text().splitlines()


def test_replay_refuses_a_corrupt_log_naming_the_line(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = run_dir / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"seed":1', b'"seed":7')
    log.write_bytes(b"".join(lines))
    assert main(["replay", str(run_dir)]) == 2
    assert "events.jsonl:1" in capsys.readouterr().out


def test_a_corrupt_final_record_is_named_by_replay_and_set_aside_by_a_resume(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = run_dir / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"job_id":"j1"', b'"job_id":"j2"')  # a complete line, newline kept
    log.write_bytes(b"".join(lines))
    assert main(["replay", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "corrupt record at line 2" in out and "events     1 (last seq 0)" in out and "torn tail" not in out

    async def resume() -> None:
        async with Runtime(run_dir, []) as rt:
            await rt.emit(JobQueued(job_id="j3", episode_id="e1", family="calc_chain", base_model="m", bundle="b"))

    with capture_logs() as logs:
        anyio.run(resume)
    assert [e["line"] for e in logs if e["event"] == "log.corrupt_record_set_aside"] == [2]
    aside = [p for p in run_dir.iterdir() if ".corrupt-line2-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == lines[1]
    anyio.run(resume)  # a second resume: the set-aside bytes are still there, the log is clean
    assert aside[0].read_bytes() == lines[1]
    capsys.readouterr()
    assert main(["replay", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "events     3 (last seq 2)" in out and "corrupt" not in out


def test_unknown_run_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--runs-root", str(tmp_path), "replay", "nope"]) == 2
    assert capsys.readouterr().err.startswith("ait replay: no run at 'nope'")


def test_costs_summarises_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from events import CostSettled, Recorded
    from handlers.budget.costs_ledger import CostsLedger

    ledger_path = tmp_path / "costs.jsonl"
    ledger = CostsLedger(ledger_path)
    for seq, (kind, usd) in enumerate([("episode", 0.25), ("job", 1.5), ("episode", 0.5)]):
        body = CostSettled(reservation_id=f"r{seq}", kind=kind, ref=f"x{seq}", usd=usd)
        ledger.record("run-a", Recorded(seq, 1_764_460_800.0 + seq, body))
    assert main(["costs", "--ledger", str(ledger_path), "--by", "kind"]) == 0
    out = capsys.readouterr().out
    assert "episode" in out and "job" in out
    assert "0.75" in out and "1.50" in out


def test_help_of_every_subcommand_imports_no_heavy_stack() -> None:
    """`ait --help` and every subcommand's help start without torch, transformers, verifiers, matplotlib, tinker:
    one fresh interpreter asks for them all, then reports which heavy modules it holds."""
    import subprocess
    import sys

    from cli import build_parser

    subcommands = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert {"episode", "train", "replay", "watch", "report"} <= set(subcommands)  # the probe reaches them
    heavy = ("torch", "transformers", "verifiers", "matplotlib", "tinker", "peft")
    probe = (
        "import sys, contextlib, io, cli\n"
        f"for argv in [['--help']] + [[name, '--help'] for name in {subcommands!r}]:\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        cli.main(argv)\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "", f"help imported {done.stdout.strip()}"
