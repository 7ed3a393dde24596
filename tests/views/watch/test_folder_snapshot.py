"""``ait watch`` / ``ait report`` start from a run's snapshot (when it holds their views) and read only the tail,
to the same state as a fold of the whole log; a snapshot that does not fit is not used."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.clock import ManualClock
from engine.runtime import Runtime
from engine.snapshot import SNAPSHOT_NAME, load_anchored
from events import JobProgressed, RunFinished, RunResumed
from handlers.registry import default_projections
from tests.golden.make_run_log import OUT
from views.report.accounts import AccountsProjection
from views.report.curves import JobCurvesProjection
from views.snapshot import snapshot_views
from views.watch.folder import RunFolder


def _run(directory: Path, *, views: bool, tail: int = 5, finish: bool = False) -> str:
    """A prefix of the golden log, reopened, snapshotted, ``tail`` more events; returns the state hash."""
    # The golden run's first 500 lines (episodes, jobs, pods, costs): enough for every view, and fast.
    lines = (OUT / "events.jsonl").read_bytes().splitlines(keepends=True)
    (directory / "events.jsonl").write_bytes(b"".join(lines[:500]))

    async def main() -> str:
        clock = ManualClock(start=1_900_000_000.0, step=0.5)
        extra = snapshot_views() if views else []
        async with Runtime(directory, default_projections(), clock=clock, durability="none", views=extra) as rt:
            # A snapshot is anchored at the last event this process emitted: emit one first.
            await rt.emit(RunFinished(status="ok", reason="done") if finish else RunResumed(from_seq=rt.next_seq))
            await rt.snapshot()
            for k in range(tail):
                await rt.emit(JobProgressed(job_id="job-x", step=k, reward=0.5, loss=1.0))
            return rt.state_hash()

    return anyio.run(main)


def _encoded(folder: RunFolder) -> dict[str, bytes]:
    return {p.name: p.encode_state(folder.states[p.name]) for p in folder.projections}


def _same(a: RunFolder, b: RunFolder) -> None:
    assert _encoded(a) == _encoded(b)
    assert (a.last_seq, a.first_ts, a.last_ts, a.finished) == (b.last_seq, b.first_ts, b.last_ts, b.finished)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("run")
    _run(directory, views=True)
    return directory


def test_views_stay_out_of_the_state_hash(tmp_path: Path, run: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "viewed").mkdir()
    assert _run(tmp_path / "plain", views=False) == _run(tmp_path / "viewed", views=True)
    loaded = load_anchored(tmp_path / "viewed", snapshot_views())
    assert loaded is not None and load_anchored(tmp_path / "plain", snapshot_views()) is None


@pytest.mark.parametrize("extra", [(), (AccountsProjection, JobCurvesProjection)], ids=["watch", "report"])
def test_the_folder_starts_from_the_snapshot_and_folds_the_tail(run: Path, extra: Any) -> None:
    fast = RunFolder(run / "events.jsonl", [cls() for cls in extra])
    assert fast.snapshot_seq == 500 and fast.reader.line_no == fast.snapshot_seq + 1
    assert fast.catch_up() == 5  # only the tail
    whole = RunFolder(run / "events.jsonl", [cls() for cls in extra], snapshot=False)
    assert whole.catch_up() == fast.last_seq + 1 and whole.snapshot_seq == -1
    _same(fast, whole)


def test_a_finished_run_is_seen_finished_from_its_snapshot(tmp_path: Path) -> None:
    _run(tmp_path, views=True, tail=0, finish=True)
    fast = RunFolder(tmp_path / "events.jsonl")
    assert fast.snapshot_seq >= 0 and fast.finished and fast.catch_up() == 0
    whole = RunFolder(tmp_path / "events.jsonl", snapshot=False)
    whole.catch_up()
    _same(fast, whole)


def test_a_snapshot_that_does_not_fit_the_log_is_not_used(tmp_path: Path, run: Path) -> None:
    shutil.copytree(run, tmp_path / "cut")
    log = tmp_path / "cut" / "events.jsonl"
    assert RunFolder(log).snapshot_seq >= 0  # the copy starts from its snapshot, as it should
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:100]))  # cut before the snapshot's seq
    assert RunFolder(log).snapshot_seq == -1
    log.write_bytes(b"".join(lines[:-5]))  # as long as at the snapshot, but its last line is another one
    assert RunFolder(log).snapshot_seq >= 0
    log.write_bytes(b"".join(lines[:-7] + lines[-5:-3]))
    folder = RunFolder(log)
    assert folder.snapshot_seq == -1
    (tmp_path / "cut" / SNAPSHOT_NAME).unlink()
    assert RunFolder(log).snapshot_seq == -1
