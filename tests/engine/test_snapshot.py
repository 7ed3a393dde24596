"""Snapshots: atomic ``{seq, state}`` files, and snapshot + tail replay equal to a full replay."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import structlog.testing

from engine.clock import ManualClock
from engine.effects import EffectsProjection
from engine.log import Durability, LogCorrupted, read_log
from engine.projection import Projection, state_hash
from engine.runtime import Runtime
from engine.snapshot import SNAPSHOT_NAME, Snapshot, load_anchored, load_snapshot, write_snapshot
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


@pytest.mark.parametrize("damage", ["a state of another type", "cut short"])
async def test_a_snapshot_that_cannot_be_read_is_ignored_and_the_whole_log_folded(tmp_path: Path, damage: str) -> None:
    """A snapshot is only an optimisation: one written by a version whose state types differ, or damaged, must
    not stop a run from opening (it raised msgspec's ValidationError out of ``Runtime``, so ``ait resume`` failed
    after an upgrade). It is ignored with a warning that names the file, and the whole log is folded."""
    live_hash = await emit_range(tmp_path, 0, 100, snapshot_at=59)
    path = tmp_path / SNAPSHOT_NAME
    data = path.read_bytes()
    assert load_snapshot(tmp_path, projections()) is not None  # the target is there and usable before the damage
    if damage == "cut short":
        path.write_bytes(data[: len(data) // 2])
    else:
        doc = msgspec.json.decode(data)
        doc["states"]["t_jobs"] = {"j0": 5}  # a job's status was a str
        path.write_bytes(msgspec.json.encode(doc))
    with structlog.testing.capture_logs() as logs:
        assert load_snapshot(tmp_path, projections()) is None
        assert load_anchored(tmp_path, projections()) is None
        CountingJobs.applied = 0
        rt = Runtime(tmp_path, [CountingJobs(), *projections()[1:]], run_id="run")
        try:
            assert CountingJobs.applied == 100 and rt.state_hash() == live_hash
        finally:
            rt.log.close()
    warned = [e for e in logs if e["event"] == "snapshot.unusable"]
    assert warned and all(e["path"] == str(path) and e["log_level"] == "warning" for e in warned)
    if damage != "cut short":
        assert "'t_jobs'" in warned[0]["error"]


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


async def test_a_reopen_reads_only_the_log_after_the_snapshots_anchor(tmp_path: Path) -> None:
    live_hash = await emit_range(tmp_path, 0, 100, snapshot_at=59)
    snap = msgspec.json.decode((tmp_path / SNAPSHOT_NAME).read_bytes(), type=Snapshot)
    data = (tmp_path / "events.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    assert snap.offset == sum(map(len, lines[:60])) and lines[59].endswith(b'"crc":"%s"}\n' % snap.last_crc.encode())
    rt = Runtime(tmp_path, projections(), run_id="run")
    try:
        assert rt.log.recovery.first_seq == 60 and len(rt.log.recovery.records) == 40  # the prefix was not read
        assert rt.next_seq == 100 and rt.state_hash() == live_hash
    finally:
        rt.log.close()
    # A bad line in the tail is still refused, with its line number in the whole file.
    bad = bytearray(data)
    at = sum(map(len, lines[:80])) + 30
    bad[at] ^= 0x20
    (tmp_path / "events.jsonl").write_bytes(bytes(bad))
    with pytest.raises(LogCorrupted) as info:
        Runtime(tmp_path, projections(), run_id="run")
    assert info.value.line_no == 81


async def test_a_log_regrown_under_the_anchor_is_read_whole(tmp_path: Path) -> None:
    """Cut below the snapshot, then grown again with other records (other times): the line at the anchor's
    offset is not the snapshot's record any more, so the whole log is read and the snapshot is not used."""
    await emit_range(tmp_path, 0, 40, snapshot_at=29)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:20]))
    async with Runtime(
        tmp_path, projections(), run_id="run", clock=ManualClock(start=5000.0, step=1.0), snapshot_every=0
    ) as rt:
        for n in range(20, 40):
            await rt.emit(body_for(n))
    records = read_log(path).records
    CountingJobs.applied = 0
    rt = Runtime(tmp_path, [CountingJobs(), *projections()[1:]], run_id="run")
    try:
        assert rt.log.recovery.first_seq == 0 and rt.next_seq == 40
        assert CountingJobs.applied == 40  # folded from the start: the snapshot's first 30 are not these
        assert rt.state_hash() == state_hash(all_projections(), fold_all(all_projections(), records))
    finally:
        rt.log.close()


async def test_the_runtime_writes_a_snapshot_every_n_durable_events(tmp_path: Path) -> None:
    async with Runtime(tmp_path, projections(), run_id="run", snapshot_every=10) as rt:
        for n in range(35):
            await rt.emit_durable(body_for(n))
        await rt.durable()
        live = rt.state_hash()
    snap = msgspec.json.decode((tmp_path / SNAPSHOT_NAME).read_bytes(), type=Snapshot)
    assert 20 <= snap.seq <= 34 and snap.offset > 0
    rt = Runtime(tmp_path, projections(), run_id="run")
    try:
        assert rt.log.recovery.first_seq == snap.seq + 1 and rt.state_hash() == live
    finally:
        rt.log.close()
