"""``ait watch`` follows a run that another process is writing: every batch the writer appends shows up.

The writer (append_child.py) waits after each batch until the watcher has shown it, so the test proves the
watcher saw each intermediate state, not just the end. A second test runs the real command in a real terminal
(tmux) and reads the screen.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from cli import main
from tests.golden.facts import GOLDEN_EVENTS
from views.watch.live import follow
from views.watch.view import DashboardView

ROOT = Path(__file__).resolve().parents[3]
BATCHES, PER = 3, 4


def _child(run: Path, ack: str) -> list[str]:
    return [sys.executable, "-m", "tests.views.watch.append_child", str(run), str(BATCHES), str(PER), ack]


async def test_watch_shows_what_another_process_appends(tmp_path: Path) -> None:
    run, acks = tmp_path / "runs" / "live", tmp_path / "acks"
    acks.mkdir()
    views: list[DashboardView] = []

    def on_view(v: DashboardView) -> None:
        views.append(v)
        done = v.episodes.started - v.episodes.running  # episodes the watcher has seen finish
        for b in range(1, done // PER + 1):
            (acks / f"ack-{b}").touch()

    out = io.StringIO()
    console = Console(file=out, width=150, record=True)
    async with await anyio.open_process(_child(run, str(acks)), cwd=ROOT) as proc:
        deadline = time.monotonic() + 60
        await follow(
            run / "events.jsonl",
            console,
            poll_s=0.02,
            exit_on_finish=True,
            on_view=on_view,
            stop=lambda: time.monotonic() > deadline,
        )
        assert await proc.wait() == 0
    seen = [v.episodes.started for v in views]
    assert seen == sorted(seen), "counts only grow"
    for b in range(1, BATCHES + 1):  # the watcher showed each batch complete before the writer went on
        assert any(v.step == b and v.episodes.started == b * PER and v.episodes.running == 0 for v in views), b
    last = views[-1]
    assert last.status == "finished:ok" and last.episodes.started == BATCHES * PER
    text = console.export_text()
    assert re.search(rf"started\s+{BATCHES * PER}\s+open\s+0\b", text)  # a finished run runs nothing
    assert re.search(rf"validated\s+{BATCHES * PER // 2}\s+rejected\s+{BATCHES * PER // 2}\b", text)
    assert f"step {BATCHES} of {BATCHES}" in text


def test_watch_once_cli_prints_one_frame(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", str(GOLDEN_EVENTS.parent), "--once", "--width", "150"]) == 0
    text = capsys.readouterr().out
    assert "golden-run" in text and "finished:ok" in text and "recent errors" in text


def _pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_watch_live_in_a_real_terminal(tmp_path: Path) -> None:
    """The real command under a real terminal: the test reads the screen and acknowledges each batch it sees."""
    run, acks = tmp_path / "runs" / "tty", tmp_path / "acks"
    acks.mkdir()
    session = f"ait-watch-{tmp_path.name}"[:60]
    writer = subprocess.Popen(_child(run, str(acks)), cwd=ROOT)
    text = ""
    try:
        deadline = time.monotonic() + 60
        while not (run / "events.jsonl").exists():
            assert time.monotonic() < deadline and writer.poll() is None, "the writer never created its log"
            time.sleep(0.05)
        cmd = f"{sys.executable} -m cli watch {run} --exit-on-finish --poll 0.05; sleep 60"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "70", "-c", str(ROOT), cmd], check=True
        )
        for b in range(1, BATCHES + 1):
            want = re.compile(rf"started\s+{b * PER}\s+running\s+0\b")
            while not want.search(text := _pane(session)):
                assert time.monotonic() < deadline, f"batch {b} never showed:\n{text}"
                time.sleep(0.1)
            (acks / f"ack-{b}").touch()
        assert writer.wait(timeout=30) == 0
        while "finished:ok" not in (text := _pane(session)):
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert re.search(rf"started\s+{BATCHES * PER}\s+open\s+0\b", text), text  # a finished run runs nothing
    assert "╭─ outer loop" in text  # drawn by Live on a terminal, not a plain dump
