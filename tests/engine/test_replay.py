"""Replay rebuilds the live state exactly, stops at --until, and --verify reports re-derived differences."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from engine.clock import ManualClock
from engine.derive import register_deriver
from engine.projection import Projection, handles
from engine.replay import replay
from engine.runtime import Runtime
from events import EventBody, JobQueued, JobSucceeded, PodRequested, RunStarted, event


class Jobs(Projection[dict[str, str]]):
    name = "jobs"
    state_type = dict[str, str]

    def initial(self) -> dict[str, str]:
        return {}

    @handles(JobQueued)
    def _queued(self, s: dict[str, str], e: JobQueued) -> dict[str, str]:
        s[e.job_id] = "queued"
        return s

    @handles(JobSucceeded)
    def _done(self, s: dict[str, str], e: JobSucceeded) -> dict[str, str]:
        s[e.job_id] = f"succeeded:{e.post}"
        return s


def _queued(i: int) -> JobQueued:
    return JobQueued(job_id=f"j{i}", episode_id="e", family="calc_chain", base_model="m", bundle="b")


async def _write(run: Path, n: int) -> str:
    async with Runtime(run, [Jobs()], clock=ManualClock(step=0.5)) as rt:
        await rt.emit(RunStarted(run_id=run.name, seed=3, code_version="test"))
        for i in range(n):
            await rt.emit(_queued(i))
            if i % 2:
                await rt.emit(JobSucceeded(job_id=f"j{i}", pre=0.1, post=0.1 * i, train_seconds=1.0))
        await rt.emit(PodRequested(pod_id="p0", gpu_type="A40", provider="local"))
        return rt.state_hash()


def test_replay_hash_equals_live_hash(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    live = anyio.run(_write, run, 9)
    result = replay(run / "events.jsonl", [Jobs()])
    assert result.state_hash == live
    assert result.count == 1 + 9 + 4 + 1
    assert result.by_type == {"run.started": 1, "job.queued": 9, "job.succeeded": 4, "pod.requested": 1}
    assert result.states["jobs"]["j3"] == "succeeded:0.30000000000000004"
    assert list(result.states["effects"]) == [f"r1:{result.last_seq}"]


def test_replay_until_stops_early(tmp_path: Path) -> None:
    run = tmp_path / "r2"
    anyio.run(_write, run, 4)
    result = replay(run / "events.jsonl", [Jobs()], until=2)
    assert result.last_seq == 2
    assert result.states["jobs"] == {"j0": "queued", "j1": "queued"}


@event("test.doubled")
class Doubled(EventBody, frozen=True, kw_only=True):
    x: int
    doubled: int


def test_verify_lists_events_whose_recomputation_differs(tmp_path: Path) -> None:
    run = tmp_path / "r3"

    async def write() -> None:
        async with Runtime(run, []) as rt:
            await rt.emit(Doubled(x=2, doubled=4))
            await rt.emit(Doubled(x=3, doubled=7))  # wrong when recorded

    anyio.run(write)
    register_deriver(Doubled, lambda e, _states: msgspec.structs.replace(e, doubled=2 * e.x))  # type: ignore[attr-defined]
    result = replay(run / "events.jsonl", [], verify=True)
    assert result.verified == 2
    assert [(m.seq, m.fields) for m in result.mismatches] == [(1, {"doubled": (7, 6)})]


def test_replay_reports_a_torn_tail_without_changing_the_file(tmp_path: Path) -> None:
    run = tmp_path / "r4"
    anyio.run(_write, run, 2)
    log = run / "events.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"seq":99,"ts"')
    size = log.stat().st_size
    result = replay(log, [Jobs()])
    assert result.torn_bytes == len(b'{"seq":99,"ts"')
    assert log.stat().st_size == size


def test_replay_reports_a_corrupt_final_record_by_its_line_without_changing_the_file(tmp_path: Path) -> None:
    run = tmp_path / "r6"
    anyio.run(_write, run, 2)
    log = run / "events.jsonl"
    data = bytearray(log.read_bytes())
    data[-30] ^= 0x01  # inside the last line, which keeps its newline
    log.write_bytes(bytes(data))
    lines = bytes(data).count(b"\n")
    result = replay(log, [Jobs()])
    assert (result.corrupt_line, result.torn_bytes) == (lines, 0) and "checksum" in result.corrupt_reason
    assert result.count == lines - 1 and log.read_bytes() == bytes(data)
    # That block went the careful way (records, not the fast path's envelopes): counted by type all the same.
    assert result.by_type == {"run.started": 1, "job.queued": 2, "job.succeeded": 1}


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_tiny_logs(tmp_path: Path, n: int) -> None:
    run = tmp_path / f"r5-{n}"

    async def write() -> None:
        async with Runtime(run, [Jobs()]) as rt:
            for i in range(n):
                await rt.emit(_queued(i))

    anyio.run(write)
    result = replay(run / "events.jsonl", [Jobs()])
    assert result.count == n
    assert result.last_seq == n - 1
