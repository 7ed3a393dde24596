"""The runtime: ``emit`` -> seq and time -> append -> apply to projections -> publish to reactors.

``emit`` does its synchronous part (seq, time, idempotency key, queueing the line, folding the event into
every projection) before its first suspension point, so code that reads a projection and emits with no
``await`` in between is atomic with respect to every other task: that is how budget checks stay exact
under concurrency. The event reaches reactors only once it is durable, in seq order, from the writer.

Reactors are async functions run in the runtime's task group (structured concurrency: a reactor that
raises cancels the others and the error surfaces from the ``async with``). Each gets its own unbounded
stream of records, so a reactor that emits can never deadlock against its own subscription.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from events import EventBody, Recorded, Request

from .clock import Clock, SystemClock
from .effects import EffectsProjection, pending_requests
from .log import Durability, EventLog
from .projection import Projection, state_hash
from .snapshot import load_snapshot, write_snapshot

__all__ = ["Reactor", "Runtime"]

log = structlog.get_logger(__name__)

S = TypeVar("S")
Reactor = Callable[["Runtime", MemoryObjectReceiveStream[Recorded]], Awaitable[None]]


class Runtime:
    """One open run: its log, its projections' live state, and its reactors."""

    #: how long a clean exit waits for reactors to finish the records already published to them
    reactor_grace_s = 5.0

    def __init__(
        self,
        directory: Path | str,
        projections: Sequence[Projection[Any]],
        *,
        run_id: str | None = None,
        clock: Clock | None = None,
        durability: Durability | str = Durability.BATCH,
    ) -> None:
        self.directory = Path(directory)
        self.run_id = run_id or self.directory.name
        self.clock = clock or SystemClock()
        self.effects = EffectsProjection()
        self.projections: list[Projection[Any]] = [*projections, self.effects]
        names = [p.name for p in self.projections]
        if len(set(names)) != len(names):
            raise ValueError(f"projection names must be unique: {names}")
        self.log = EventLog.open(self.directory / "events.jsonl", durability)  # takes the run's writer lock
        try:
            self.states: dict[str, Any] = self._rebuild()
        except BaseException:
            self.log.close()  # and lets the lock go: this process will not write the run
            raise
        self.log.on_durable = self._publish
        self._subscribers: list[MemoryObjectSendStream[Recorded]] = []
        self._tg: TaskGroup | None = None
        self._last_durable = self.log.next_seq - 1
        self._changed = anyio.Event()
        self._reactors = 0

    def _rebuild(self) -> dict[str, Any]:
        records = self.log.recovery.records
        snap = load_snapshot(self.directory, self.projections)
        if snap is not None and snap[0] < len(records):
            start, states = snap[0] + 1, snap[1]
        else:
            start, states = 0, {p.name: p.initial() for p in self.projections}
        for rec in records[start:]:
            for p in self.projections:
                states[p.name] = p.apply(states[p.name], rec)
        # The opened records are not kept: memory stays bounded by the projections, not the log.
        return states

    # -- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.log.run_writer)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        try:
            if exc_type is None:
                await self.log.drain()
                # Let reactors see every record already published: close their streams (an ``async for`` over
                # one then ends once it is empty) and give them a moment, before anything is cancelled. A
                # cancelled receive could otherwise drop the record being delivered.
                for s in self._subscribers:
                    s.close()
                with anyio.move_on_after(self.reactor_grace_s):
                    await self.wait_until(lambda: self._reactors == 0)
                await self.log.drain()  # what the reactors emitted while finishing
        finally:
            self._tg.cancel_scope.cancel()
            for s in self._subscribers:
                s.close()
            try:
                suppressed = await self._tg.__aexit__(exc_type, exc, tb)
            finally:
                self.log.close()
        return suppressed

    # -- emitting ----------------------------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        return self.log.next_seq

    def emit_nowait(self, body: EventBody) -> tuple[Recorded, anyio.Event]:
        """The synchronous half of :meth:`emit`: the event is in every projection when this returns."""
        seq = self.log.next_seq
        if isinstance(body, Request) and not body.key:
            body = msgspec.structs.replace(body, key=f"{self.run_id}:{seq}")
        rec = Recorded(seq, self.clock.now(), body)
        done = self.log.submit(rec)
        for p in self.projections:
            self.states[p.name] = p.apply(self.states[p.name], rec)
        return rec, done

    async def emit(self, body: EventBody) -> Recorded:
        """Record ``body``; returns once it is durable (per the log's mode) and published."""
        if self._tg is None:
            raise RuntimeError("Runtime.emit outside `async with runtime:` (no writer is running)")
        batch = self.log.current_batch()
        rec, done = self.emit_nowait(body)
        await done.wait()
        self.log.check(batch.error)
        return rec

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` (read from projections) holds; re-checked after each durable batch."""
        while not predicate():
            changed = self._changed
            await changed.wait()

    def _publish(self, records: list[Recorded]) -> None:
        self._last_durable = records[-1].seq
        self._changed.set()
        self._changed = anyio.Event()
        for stream in self._subscribers:
            for rec in records:
                # A closed stream: the reactor has finished; nothing left to tell it.
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    stream.send_nowait(rec)

    # -- state -------------------------------------------------------------------------------------

    def state(self, projection: type[Projection[S]] | Projection[S]) -> S:
        """The live state of ``projection`` (its class or the installed instance), typed as that projection's."""
        value: S = self.states[projection.name]
        return value

    def state_hash(self) -> str:
        return state_hash(self.projections, self.states)

    def pending_requests(self) -> list[Recorded]:
        """Requests with no outcome yet: what a resumed run must retry, with the same keys."""
        return pending_requests(self.state(self.effects), self.log.codec)

    # -- reactors ----------------------------------------------------------------------------------

    def subscribe(self) -> MemoryObjectReceiveStream[Recorded]:
        """A stream of every record made durable from now on."""
        send, receive = anyio.create_memory_object_stream[Recorded](math.inf)
        self._subscribers.append(send)
        return receive

    def start_reactor(self, reactor: Reactor) -> None:
        if self._tg is None:
            raise RuntimeError("start_reactor outside `async with runtime:`")
        stream = self.subscribe()
        self._tg.start_soon(self._run_reactor, reactor, stream)

    async def _run_reactor(self, reactor: Reactor, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        self._reactors += 1
        try:
            async with stream:
                await reactor(self, stream)
        finally:
            self._reactors -= 1
            self._changed.set()
            self._changed = anyio.Event()

    # -- snapshots ---------------------------------------------------------------------------------

    async def snapshot(self) -> int:
        """Write an atomic snapshot of every projection; returns its seq (-1 for an empty log)."""
        seq = self.log.next_seq - 1
        # Encode now, synchronously, so the states match ``seq`` exactly; write only once seq is durable.
        encoded = {p.name: p.encode_state(self.states[p.name]) for p in self.projections}
        digest = self.state_hash()
        await self.log.drain()
        await anyio.to_thread.run_sync(lambda: write_snapshot(self.directory, seq, encoded, digest))
        return seq
