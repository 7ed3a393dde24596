"""The runtime: emit -> seq and time -> append -> fold -> publish; reactors; request keys; clean failure."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.clock import ManualClock
from engine.effects import EffectsProjection
from engine.log import LogFatalError, read_log
from engine.projection import state_hash
from engine.runtime import Runtime
from events import JobQueued, JobStarted, PodProvisionFailed, PodReady, PodRequested, Recorded
from tests.engine.spine_model import JobsProjection, Model, body_for, fold_all, live_states, projections


def queued(job: str) -> JobQueued:
    return JobQueued(job_id=job, episode_id="ep", family="calc_chain", base_model="tiny", bundle="b")


async def test_emit_assigns_gapless_seq_and_the_clocks_time(tmp_path: Path) -> None:
    model = Model()
    async with Runtime(tmp_path, projections(), run_id="r1", clock=ManualClock(start=100.0, step=0.5)) as rt:
        for n in range(20):
            rec = await rt.emit(body_for(n, "r1"))
            model.apply(rec.seq, rec.event)
            assert (rec.seq, rec.ts) == (n, 100.0 + 0.5 * n)
        assert live_states(rt.states) == model.states()
    assert [(r.seq, r.ts) for r in read_log(tmp_path / "events.jsonl").records] == [
        (n, 100.0 + 0.5 * n) for n in range(20)
    ]


async def test_projections_see_the_event_before_emit_first_awaits(tmp_path: Path) -> None:
    """Check-then-emit with no await in between is atomic: 50 tasks racing to queue one job queue it once."""
    async with Runtime(tmp_path, projections(), durability="none") as rt:
        rec, _done = rt.emit_nowait(queued("j"))
        assert rt.state(JobsProjection) == {"j": "queued"} and rec.seq == 0

        async def queue_once(job: str) -> None:
            if job not in rt.state(JobsProjection):
                await rt.emit(queued(job))

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(queue_once, f"k{i % 5}")
    types = [r.event for r in read_log(tmp_path / "events.jsonl").records]
    assert sorted(e.job_id for e in types if isinstance(e, JobQueued)) == ["j", "k0", "k1", "k2", "k3", "k4"]


async def test_state_hash_equals_a_rebuild_from_the_log(tmp_path: Path) -> None:
    async with Runtime(tmp_path, projections(), run_id="run") as rt:
        for n in range(60):
            await rt.emit(body_for(n))
        live = rt.state_hash()
    records = read_log(tmp_path / "events.jsonl").records
    all_projs = [*projections(), EffectsProjection()]
    assert state_hash(all_projs, fold_all(all_projs, records)) == live


async def test_reactors_receive_durable_events_in_seq_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.jsonl"
    synced = 0
    real = os.fsync

    def fsync(fd: int) -> None:
        nonlocal synced
        size = os.fstat(fd).st_size
        real(fd)
        synced = max(synced, size)

    monkeypatch.setattr(os, "fsync", fsync)
    n_producers, per_producer = 20, 10
    total = n_producers * per_producer
    seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    all_seen = anyio.Event()

    def reactor(name: str) -> Any:
        async def run(rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
            async for rec in stream:
                seen[name].append((rec.seq, synced))
                if all(len(v) == total for v in seen.values()):
                    all_seen.set()

        return run

    async def producer(rt: Runtime, p: int) -> None:
        for i in range(per_producer):
            await rt.emit(queued(f"p{p}-{i}"))

    async with Runtime(tmp_path, projections()) as rt:
        rt.start_reactor(reactor("a"))
        rt.start_reactor(reactor("b"))
        async with anyio.create_task_group() as tg:
            for p in range(n_producers):
                tg.start_soon(producer, rt, p)
        with anyio.fail_after(5):
            await all_seen.wait()
    data = path.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for name, got in seen.items():
        assert [seq for seq, _ in got] == list(range(total)), name
        for seq, synced_then in got:
            assert synced_then >= ends[seq], f"reactor {name} saw seq {seq} before it was durable"


async def test_emit_is_acknowledged_in_the_buffer_and_durable_waits_for_the_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commit before effect: emit returns before its fsync; ``durable`` returns only after it."""
    path = tmp_path / "events.jsonl"
    real = os.fsync
    synced = 0
    release = threading.Event()

    def slow_fsync(fd: int) -> None:  # runs on the writer's worker thread
        nonlocal synced
        release.wait(timeout=10)
        size = os.fstat(fd).st_size
        real(fd)
        synced = size

    async with Runtime(tmp_path, projections()) as rt:
        monkeypatch.setattr(os, "fsync", slow_fsync)
        recs = [await rt.emit(queued(f"j{i}")) for i in range(5)]
        assert rt.state(JobsProjection)  # folded into the projections at once
        assert synced == 0 and rt.log.durable_seq == -1  # acknowledged while nothing is synced yet
        waiter_done = anyio.Event()

        async def effect() -> None:
            await rt.durable(recs[-1].seq)
            # the barrier let the effect through only once every line up to its request is on disk
            assert synced > 0 and rt.log.durable_seq >= recs[-1].seq
            waiter_done.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(effect)
                await anyio.sleep(0.05)
                assert not waiter_done.is_set()  # still waiting for the fsync
                release.set()
        finally:
            release.set()
        assert waiter_done.is_set()
        await rt.durable()  # nothing pending: returns at once
        rec = await rt.emit_durable(queued("k"))
        assert rt.log.durable_seq == rec.seq
        monkeypatch.setattr(os, "fsync", real)
    assert [r.seq for r in read_log(path).records] == list(range(6))


async def test_a_reactor_may_emit(tmp_path: Path) -> None:
    """A reactor that emits in response to what it sees never deadlocks on its own subscription."""
    done = anyio.Event()

    async def starter(rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        async for rec in stream:
            if isinstance(rec.event, JobQueued):
                await rt.emit(JobStarted(job_id=rec.event.job_id, pod_id="pod"))
            if len(rt.state(JobsProjection)) == 30 and all(
                v.startswith("running") for v in rt.state(JobsProjection).values()
            ):
                done.set()

    async with Runtime(tmp_path, projections(), durability="none") as rt:
        rt.start_reactor(starter)
        for i in range(30):
            await rt.emit(queued(f"j{i}"))
        with anyio.fail_after(5):
            await done.wait()
    records = read_log(tmp_path / "events.jsonl").records
    assert len(records) == 60
    started = [r.event.job_id for r in records if isinstance(r.event, JobStarted)]
    assert started == [f"j{i}" for i in range(30)]


async def test_request_keys_are_run_id_and_seq(tmp_path: Path) -> None:
    async with Runtime(tmp_path, projections(), run_id="run-7") as rt:
        await rt.emit(queued("j"))
        rec = await rt.emit(PodRequested(pod_id="p1", gpu_type="H100", provider="local"))
        explicit = await rt.emit(PodRequested(key="mine", pod_id="p2", gpu_type="H100", provider="local"))
        assert isinstance(rec.event, PodRequested) and rec.event.key == "run-7:1"
        assert isinstance(explicit.event, PodRequested) and explicit.event.key == "mine"
    on_disk = read_log(tmp_path / "events.jsonl").records
    assert on_disk[1].event == rec.event  # the key is recorded, not recomputed


async def test_pending_requests_survive_a_resume(tmp_path: Path) -> None:
    def request(pod: str) -> PodRequested:
        return PodRequested(pod_id=pod, gpu_type="A100", provider="runpod")

    async with Runtime(tmp_path, projections(), run_id="run") as rt:
        for pod in ("a", "b", "c", "d"):
            await rt.emit(request(pod))
        await rt.emit(PodReady(key="run:0", pod_id="a", provider_id="x", url="u"))
        await rt.emit(PodProvisionFailed(key="run:2", pod_id="c", kind="stock_out"))
        before = rt.pending_requests()
        await rt.snapshot()
        await rt.emit(queued("after-snapshot"))
    assert [(r.seq, r.event) for r in before] == [
        (1, PodRequested(key="run:1", pod_id="b", gpu_type="A100", provider="runpod")),
        (3, PodRequested(key="run:3", pod_id="d", gpu_type="A100", provider="runpod")),
    ]
    for with_snapshot in (True, False):
        if not with_snapshot:
            (tmp_path / "snapshot.json").unlink()
        rt2 = Runtime(tmp_path, projections(), run_id="run")
        try:
            assert [(r.seq, r.event) for r in rt2.pending_requests()] == [(r.seq, r.event) for r in before]
        finally:
            rt2.log.close()
    # Answering one on the resumed run removes exactly that one.
    async with Runtime(tmp_path, projections(), run_id="run") as rt3:
        await rt3.emit(PodReady(key="run:3", pod_id="d", provider_id="y", url="u"))
        assert [r.event.key for r in rt3.pending_requests() if isinstance(r.event, PodRequested)] == ["run:1"]


async def test_a_failing_reactor_cancels_the_runtime_cleanly(tmp_path: Path) -> None:
    emitted: list[int] = []
    other_finished = anyio.Event()

    async def failing(rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        async for rec in stream:
            if rec.seq == 3:
                raise ValueError("reactor broke on seq 3")

    async def bystander(rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        try:
            async for _rec in stream:
                pass
        finally:
            other_finished.set()

    runtime: Runtime | None = None
    with pytest.raises(ExceptionGroup) as info:
        async with Runtime(tmp_path, projections(), run_id="run") as rt:
            runtime = rt
            rt.start_reactor(failing)
            rt.start_reactor(bystander)
            with anyio.fail_after(5):
                for n in range(1000):
                    # acknowledged = durable (what an effect waits for); a buffered emit may be lost
                    emitted.append((await rt.emit_durable(body_for(n))).seq)
                    await anyio.lowlevel.checkpoint()
    assert info.group_contains(ValueError, match="reactor broke on seq 3")
    assert not info.group_contains(TimeoutError)
    assert other_finished.is_set()  # the other reactor was cancelled, its cleanup ran
    assert runtime is not None
    with pytest.raises(LogFatalError, match="closed"):
        runtime.emit_nowait(queued("late"))
    # Everything made durable is on disk, and the run reopens and carries on from there.
    assert 3 <= len(emitted) < 1000
    records = read_log(tmp_path / "events.jsonl").records
    assert [r.seq for r in records][: len(emitted)] == emitted
    async with Runtime(tmp_path, projections(), run_id="run") as rt:
        assert rt.next_seq == len(records)
        assert (await rt.emit(body_for(len(records)))).seq == len(records)


async def test_an_fsync_error_stops_the_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    def failing(fd: int) -> None:
        nonlocal calls
        calls += 1
        raise OSError(errno.EIO, "Input/output error")

    rt = Runtime(tmp_path, projections())
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(BaseExceptionGroup) as info:
        async with rt:
            await rt.emit(queued("j"))
    assert info.group_contains(OSError, match="Input/output error")
    assert calls == 1
    with pytest.raises(LogFatalError):
        rt.emit_nowait(queued("again"))
    assert calls == 1


async def test_misuse_is_refused(tmp_path: Path) -> None:
    rt = Runtime(tmp_path, projections())
    try:
        with pytest.raises(RuntimeError, match="outside `async with runtime:`"):
            await rt.emit(queued("j"))
        with pytest.raises(RuntimeError, match="start_reactor outside"):
            rt.start_reactor(lambda _rt, _s: anyio.lowlevel.checkpoint())
    finally:
        rt.log.close()
    with pytest.raises(ValueError, match="projection names must be unique"):
        Runtime(tmp_path, [*projections(), *projections()])


async def test_an_error_exit_still_writes_what_was_acknowledged(tmp_path: Path) -> None:
    """emit returns once a record is in the buffer; leaving the runtime on an error (not a crash) must not drop it:
    a failed run's run.finished was lost this way (seen in CI: the log ended at the job.queued before it)."""

    class Boom(Exception):
        pass

    raised = False
    try:
        async with Runtime(tmp_path / "run", []) as rt:
            for i in range(50):
                await rt.emit(JobQueued(job_id=f"j{i}", episode_id="e", family="f", base_model="m", bundle="b"))
            raise Boom
    except* Boom:  # the runtime's task group wraps it
        raised = True
    assert raised
    records = read_log(tmp_path / "run" / "events.jsonl").records
    assert [r.event.job_id for r in records if isinstance(r.event, JobQueued)] == [f"j{i}" for i in range(50)]
