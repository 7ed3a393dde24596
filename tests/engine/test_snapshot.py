"""Snapshots: atomic ``{seq, state}`` files, and snapshot + tail replay equal to a full replay."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from engine.clock import ManualClock
from engine.effects import EffectsProjection
from engine.log import Durability, read_log
from engine.projection import Projection, state_hash
from engine.runtime import Runtime
from engine.snapshot import SNAPSHOT_NAME, Snapshot, load_snapshot, write_snapshot
from events import JobQueued, Recorded
from tests.engine.spine_model import JobsProjection, Model, body_for, fold_all, live_states, projections


def all_projections() -> list[Projection[Any]]:
    return [*projections(), EffectsProjection()]


async def emit_range(directory: Path, start: int, stop: int, *, snapshot_at: int | None = None) -> str:
    """Open a runtime on ``directory``, emit ``body_for(start..stop-1)``, optionally snapshot after ``snapshot_at``."""
    async with Runtime(directory, projections(), run_id="run", clock=ManualClock(step=1.0)) as rt:
        assert rt.next_seq == start
        for n in range(start, stop):
            rec = await rt.emit(body_for(n))
            assert rec.seq == n
            if n == snapshot_at:
                assert await rt.snapshot() == n
        return rt.state_hash()


class CountingJobs(JobsProjection):
    """The jobs projection, counting how many records a reopen folds."""

    applied = 0

    def apply(self, state: dict[str, str], rec: Recorded) -> dict[str, str]:
        CountingJobs.applied += 1
        return super().apply(state, rec)


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    projs = all_projections()
    model = Model()
    for n in range(30):
        model.apply(n, body_for(n))
    states: dict[str, Any] = {**model.states(), "effects": {}}
    encoded = {p.name: p.encode_state(states[p.name]) for p in projs}
    path = write_snapshot(tmp_path, 29, encoded, "abc")
    assert path == tmp_path / SNAPSHOT_NAME
    assert os.listdir(tmp_path) == [SNAPSHOT_NAME]
    loaded = load_snapshot(tmp_path, projs)
    assert loaded is not None
    assert loaded[0] == 29 and loaded[1] == states
    assert msgspec.json.decode(path.read_bytes(), type=Snapshot).state_hash == "abc"


def test_snapshot_is_synced_before_and_after_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        calls.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_snapshot(tmp_path, 0, {"a": b"{}"})
    assert calls == ["fsync-file", "rename", "fsync-dir"]


def test_a_failed_write_leaves_the_old_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    projs = all_projections()
    good = {p.name: p.encode_state(p.initial()) for p in projs}
    write_snapshot(tmp_path, 3, good)

    def crash(src: Any, dst: Any) -> None:
        raise OSError("power went out before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power went out"):
        write_snapshot(tmp_path, 9, {p.name: b"garbage" for p in projs})
    loaded = load_snapshot(tmp_path, projs)
    assert loaded is not None and loaded[0] == 3
    assert os.listdir(tmp_path) == [SNAPSHOT_NAME]  # the failed write's temp file is gone


def test_a_snapshot_lacking_a_projection_is_not_used(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 5, {"t_jobs": b"{}"})
    assert load_snapshot(tmp_path, all_projections()) is None
    assert load_snapshot(tmp_path / "nowhere", all_projections()) is None


async def test_snapshot_plus_tail_equals_full_replay(tmp_path: Path) -> None:
    live_hash = await emit_range(tmp_path, 0, 100, snapshot_at=59)
    await emit_range(tmp_path, 100, 100)  # a reopen with nothing to add keeps the hash
    records = read_log(tmp_path / "events.jsonl").records
    full = fold_all(all_projections(), records)
    assert state_hash(all_projections(), full) == live_hash

    # Reopen with the snapshot: only the 40 events after seq 59 are folded, and the state is the same.
    CountingJobs.applied = 0
    rt = Runtime(tmp_path, [CountingJobs(), *projections()[1:]], run_id="run")
    try:
        assert CountingJobs.applied == 40
        assert rt.states == full and rt.state_hash() == live_hash
    finally:
        rt.log.close()

    # Without the snapshot the full replay gives the same state.
    (tmp_path / SNAPSHOT_NAME).unlink()
    CountingJobs.applied = 0
    rt = Runtime(tmp_path, [CountingJobs(), *projections()[1:]], run_id="run")
    try:
        assert CountingJobs.applied == 100
        assert rt.state_hash() == live_hash
    finally:
        rt.log.close()


async def test_snapshot_records_the_live_hash_and_seq(tmp_path: Path) -> None:
    async with Runtime(tmp_path, projections(), run_id="run", durability=Durability.NONE) as rt:
        assert await rt.snapshot() == -1  # an empty log
        for n in range(10):
            await rt.emit(body_for(n))
        seq = await rt.snapshot()
        live = rt.state_hash()
    snap = msgspec.json.decode((tmp_path / SNAPSHOT_NAME).read_bytes(), type=Snapshot)
    assert (seq, snap.seq, snap.state_hash) == (9, 9, live)


async def test_a_snapshot_ahead_of_the_log_falls_back_to_a_full_replay(tmp_path: Path) -> None:
    """A log that lost its tail (a power loss after the snapshot) must not be patched over by a snapshot
    that claims events the log no longer has."""
    await emit_range(tmp_path, 0, 30, snapshot_at=29)
    path = tmp_path / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:20]))
    model = Model()
    for n in range(20):
        model.apply(n, body_for(n))
    rt = Runtime(tmp_path, projections(), run_id="run")
    try:
        assert rt.next_seq == 20
        assert live_states(rt.states) == model.states()
    finally:
        rt.log.close()


async def test_concurrent_snapshots_never_leave_a_mangled_file(tmp_path: Path) -> None:
    """Producers that snapshot while others emit: overlapping writes must not share a temp file."""
    state_sizes = 0

    async def produce(rt: Runtime, k: int) -> None:
        for i in range(8):
            await rt.emit(queued_job(f"p{k}-{i}-" + "x" * (k * 37 % 200)))
            if (k + i) % 3 == 0:
                await rt.snapshot()

    async with Runtime(tmp_path, projections(), durability="none") as rt:
        async with anyio.create_task_group() as tg:
            for k in range(12):
                tg.start_soon(produce, rt, k)
        state_sizes = len(rt.state(JobsProjection))
        live = rt.state_hash()
    assert state_sizes == 96
    loaded = load_snapshot(tmp_path, all_projections())
    assert loaded is not None
    # no temp file left behind (writer.lock is the run's writer lock, engine/writer_lock.py)
    assert sorted(os.listdir(tmp_path)) == ["events.jsonl", SNAPSHOT_NAME, "writer.lock"]
    rt2 = Runtime(tmp_path, projections())
    try:
        assert rt2.state_hash() == live
    finally:
        rt2.log.close()


def queued_job(job: str) -> JobQueued:
    return JobQueued(job_id=job, episode_id="e", family="f", base_model="m", bundle="b")
