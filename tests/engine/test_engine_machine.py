"""Stateful property test: random emits, snapshots, restarts, torn tails and reopens keep the runtime's
projections equal to a plain-dict model and to a rebuild from the log, with equal state hashes.

Hypothesis has no async rules, so each machine keeps its Runtime open inside a blocking anyio portal (an
event loop on a private thread) and calls into it synchronously.

``os.fsync`` is a no-op here: on a busy disk it costs milliseconds and this test is about the folds, not
the disk. The writer still takes its ``always`` / ``batch`` / ``none`` code paths; what an fsync guarantees
is tested in test_log.py and test_crash.py.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.clock import ManualClock
from engine.effects import EffectsProjection
from engine.log import Durability, read_log
from engine.projection import state_hash
from engine.runtime import Runtime
from engine.snapshot import SNAPSHOT_NAME
from events import (
    CostReserved,
    CostSettled,
    EventBody,
    JobFailed,
    JobQueued,
    JobStarted,
    JobSucceeded,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    Recorded,
)
from events.codec import encode_record
from tests.engine.spine_model import Model, fold_all, live_states, projections

RUN_ID = "m"
jobs = st.sampled_from(["j0", "j1", "j2", "j3"])
pods = st.sampled_from(["p0", "p1", "p2"])
usd = st.sampled_from([0.0, 0.01, 0.1, 0.25, 1.5, 3.0])  # sums of these are order-sensitive floats: good
kinds = st.sampled_from(["job", "episode"])


# Built once: hypothesis strategies are costly to build, and each rule draws many bodies.
PLAIN_BODIES: st.SearchStrategy[EventBody] = st.one_of(
    st.builds(lambda j: JobQueued(job_id=j, episode_id="e", family="f", base_model="m", bundle="b"), jobs),
    st.builds(lambda j, p: JobStarted(job_id=j, pod_id=p), jobs, pods),
    st.builds(lambda j, post: JobSucceeded(job_id=j, pre=0.0, post=post, train_seconds=1.0), jobs, usd),
    st.builds(lambda j, r: JobFailed(job_id=j, reason=r), jobs, st.sampled_from(["oom", "timeout"])),
    st.builds(lambda k, u: CostReserved(reservation_id="r", kind=k, ref="x", usd=u), kinds, usd),
    st.builds(lambda k, u: CostSettled(reservation_id="r", kind=k, ref="x", usd=u), kinds, usd),
    st.builds(lambda p: PodRequested(pod_id=p, gpu_type="H100", provider="local"), pods),
    st.builds(lambda p: PodLost(pod_id=p, reason="gone"), pods),
)
# An outcome for one of the pending requests (which, is picked by index when the body is made).
ANSWERS = st.tuples(st.booleans(), pods, st.integers(0, 63))
BODIES = st.one_of(PLAIN_BODIES, ANSWERS)


def make_body(drawn: EventBody | tuple[bool, str, int], pending: list[str]) -> EventBody:
    if isinstance(drawn, EventBody):
        return drawn
    ready, pod, index = drawn
    if not pending:
        return PodLost(pod_id=pod, reason="nothing to answer")
    key = pending[index % len(pending)]
    if ready:
        return PodReady(key=key, pod_id=pod, provider_id="x", url="u")
    return PodProvisionFailed(key=key, pod_id=pod, kind="quota")


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="engine-machine-"))
        self.stack = ExitStack()
        self.stack.enter_context(mock.patch("os.fsync", lambda fd: None))
        self.portal: BlockingPortal = self.stack.enter_context(start_blocking_portal())
        self.model = Model()
        self.clock = ManualClock(step=0.25)
        self.durability = Durability.BATCH
        self.rt: Runtime | None = None
        self.rt_cm: AbstractContextManager[Runtime] | None = None
        self.snapshots = 0

    # -- runtime lifecycle -------------------------------------------------------------------------

    def _open(self) -> None:
        rt = Runtime(self.dir, projections(), run_id=RUN_ID, clock=self.clock, durability=self.durability)
        self.rt_cm = self.portal.wrap_async_context_manager(rt)
        self.rt = self.rt_cm.__enter__()

    def _close(self) -> None:
        if self.rt_cm is not None:
            self.rt_cm.__exit__(None, None, None)
            self.rt, self.rt_cm = None, None

    @initialize(durability=st.sampled_from(list(Durability)))
    def start(self, durability: Durability) -> None:
        self.durability = durability
        self._open()

    def teardown(self) -> None:
        try:
            self._close()
        finally:
            self.stack.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules -------------------------------------------------------------------------------------

    def _record(self, recs: list[Recorded]) -> None:
        for rec in sorted(recs, key=lambda r: r.seq):
            self.model.apply(rec.seq, rec.event)

    @rule(drawn=BODIES)
    def emit(self, drawn: EventBody | tuple[bool, str, int]) -> None:
        assert self.rt is not None
        body = make_body(drawn, sorted(self.model.pending))
        rec = self.portal.call(self.rt.emit, body)
        if isinstance(body, PodRequested):
            assert isinstance(rec.event, PodRequested) and rec.event.key == f"{RUN_ID}:{rec.seq}"
        self._record([rec])

    @rule(drawn=st.lists(BODIES, min_size=2, max_size=12))
    def emit_concurrently(self, drawn: list[EventBody | tuple[bool, str, int]]) -> None:
        """Several producers at once: one group commit, seq assigned in submission order."""
        assert self.rt is not None
        rt = self.rt
        pending = sorted(self.model.pending)  # two answers to one request: allowed (the second is a no-op)
        batch = [make_body(b, pending) for b in drawn]
        n = len(batch)

        async def emit_all() -> list[Recorded]:
            out: list[Recorded] = []

            async def one(b: EventBody) -> None:
                out.append(await rt.emit(b))

            async with anyio.create_task_group() as tg:
                for b in batch:
                    tg.start_soon(one, b)
            return out

        recs = self.portal.call(emit_all)
        assert sorted(r.seq for r in recs) == list(range(self.model.count, self.model.count + n))
        self._record(recs)

    @rule()
    def snapshot(self) -> None:
        assert self.rt is not None
        seq = self.portal.call(self.rt.snapshot)
        assert seq == self.model.count - 1
        self.snapshots += 1

    @rule()
    def restart(self) -> None:
        """Close cleanly and reopen from disk (snapshot + tail, or the whole log)."""
        self._close()
        self._open()

    @precondition(lambda self: self.snapshots > 0)
    @rule()
    def drop_snapshot(self) -> None:
        (self.dir / SNAPSHOT_NAME).unlink(missing_ok=True)

    @rule(data=st.data())
    def crash_with_torn_tail(self, data: st.DataObject) -> None:
        """Close, then leave a partly written next line behind (what a crash mid-append leaves); reopen."""
        self._close()
        line = encode_record(
            Recorded(
                self.model.count, 0.0, JobQueued(job_id="torn", episode_id="e", family="f", base_model="m", bundle="b")
            )
        )
        cut = data.draw(st.integers(1, len(line) - 1))
        with (self.dir / "events.jsonl").open("ab") as f:
            f.write(line[:cut])
        self._open()
        assert self.rt is not None
        assert self.rt.log.recovery.torn_bytes == cut

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def live_state_equals_the_model(self) -> None:
        if self.rt is None:
            return
        assert self.rt.next_seq == self.model.count
        assert live_states(self.rt.states) == self.model.states()
        pending = {r.event.key: r.seq for r in self.rt.pending_requests() if isinstance(r.event, PodRequested)}
        assert pending == self.model.pending

    @invariant()
    def reopening_from_disk_gives_the_live_state(self) -> None:
        """A second runtime opened on the directory's bytes now (snapshot + tail, as a resume would) agrees.

        On a copy: the live runtime holds the run's writer lock, which refuses a second writer on the same
        directory (tests/engine/test_writer_lock.py)."""
        if self.rt is None:
            return
        copy = Path(tempfile.mkdtemp(prefix="engine-machine-reopen-")) / self.dir.name
        shutil.copytree(self.dir, copy)
        other = Runtime(copy, projections(), run_id=RUN_ID)
        try:
            assert live_states(other.states) == self.model.states()
            assert other.state_hash() == self.rt.state_hash()
        finally:
            other.log.close()
            shutil.rmtree(copy.parent, ignore_errors=True)

    @invariant()
    def a_rebuild_from_the_log_equals_the_live_state(self) -> None:
        if self.rt is None:
            return
        records = read_log(self.dir / "events.jsonl").records  # also checks crc and gap-free seq
        assert len(records) == self.model.count
        all_projs: list[Any] = [*projections(), EffectsProjection()]
        rebuilt = fold_all(all_projs, records)
        assert live_states(rebuilt) == self.model.states()
        assert state_hash(all_projs, rebuilt) == self.rt.state_hash()


EngineMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineMachine = EngineMachine.TestCase
