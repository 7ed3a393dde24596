"""The runtime: ``emit`` -> seq and time -> buffer -> apply to projections; durable -> publish to reactors.

``emit`` does its synchronous part (seq, time, idempotency key, queueing the line, folding the event into
every projection) before its first suspension point, so code that reads a projection and emits with no
``await`` in between is atomic with respect to every other task: that is how budget checks stay exact
under concurrency.

Commit before effect. ``emit`` is acknowledged once its line is in the log's buffer: it does not wait for
the fsync. Durability is awaited only where something leaves the process (a pod create, a paid API call,
a reply to a pod or client, an artifact published): the code that launches such an effect first awaits
:meth:`Runtime.durable` (every event emitted so far, or up to a seq, is durable), so no effect is ever
launched for a request a crash could still take back. Reactors see an event only once it is durable, in
seq order, from the writer, so an effect a reactor launches for an event it received is always safe.
The ports that leave the process are wrapped with this barrier where they are wired
(:mod:`handlers.durable_ports`); :meth:`emit_durable` is emit + barrier, for one-off cases.

Reactors are async functions run in the runtime's task group (structured concurrency: a reactor that
raises cancels the others and the error surfaces from the ``async with``). Each gets its own unbounded
stream of records, so a reactor that emits can never deadlock against its own subscription.
"""

from __future__ import annotations

import contextlib
import itertools
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
from .folder import Folder
from .log import Durability, EventLog
from .projection import Projection, encoded_hash, state_hash
from .snapshot import load_snapshot, snapshot_anchor, write_snapshot

__all__ = ["Reactor", "Runtime"]

log = structlog.get_logger(__name__)

S = TypeVar("S")
Reactor = Callable[["Runtime", MemoryObjectReceiveStream[Recorded]], Awaitable[None]]


class Runtime:
    """One open run: its log, its projections' live state, and its reactors."""

    #: how long a clean exit waits for reactors to finish the records already published to them
    reactor_grace_s = 5.0
    #: lines an ``emit`` may leave queued before it waits for the writer (bounds the buffer's memory)
    max_buffered = 65_536

    def __init__(
        self,
        directory: Path | str,
        projections: Sequence[Projection[Any]],
        *,
        run_id: str | None = None,
        clock: Clock | None = None,
        durability: Durability | str = Durability.BATCH,
        snapshot_every: int = 50_000,
        views: Sequence[Projection[Any]] = (),
    ) -> None:
        """``snapshot_every``: write a snapshot each time this many events have become durable since the last
        one (0: only when :meth:`snapshot` is called). A reopened run then reads only the log after it.

        ``views``: projections folded and snapshotted like the others but left out of :meth:`state_hash`
        (which stays what ``ait replay`` computes): what a reader of the run folds for itself, such as the
        dashboard's (``ait watch`` and ``ait report`` then start from the snapshot and read only the tail)."""
        self.directory = Path(directory)
        self.run_id = run_id or self.directory.name
        self.clock = clock or SystemClock()
        self.effects = EffectsProjection()
        self.projections: list[Projection[Any]] = [*projections, self.effects, *views]
        self._hashed = self.projections[: len(projections) + 1]
        names = [p.name for p in self.projections]
        if len(set(names)) != len(names):
            raise ValueError(f"projection names must be unique: {names}")
        self._durability = Durability(durability)
        self._anchor = snapshot_anchor(self.directory)
        # takes the run's writer lock
        self.log = EventLog.open(self.directory / "events.jsonl", durability, start=self._anchor)
        try:
            self.states: dict[str, Any] = self._rebuild()
        except BaseException:
            self.log.close()  # and lets the lock go: this process will not write the run
            raise
        self.snapshot_every = snapshot_every
        self._snap_seq = self._snapshot_seq
        self._snapping = False
        self.log.on_durable = self._publish
        self._subscribers: list[MemoryObjectSendStream[Recorded]] = []
        self._tg: TaskGroup | None = None
        self._last_durable = self.log.next_seq - 1
        self._changed = anyio.Event()
        self._reactors = 0

    def _rebuild(self) -> dict[str, Any]:
        snap = load_snapshot(self.directory, self.projections)
        self._snapshot_seq = snap[0] if snap is not None else -1
        if self.log.recovery.first_seq > 0 and (snap is None or snap[0] != self.log.recovery.first_seq - 1):
            # Only the tail after an anchor was read, but the snapshot is not that anchor's (it was replaced
            # in between, or does not fit these projections): read the whole log instead.
            self.log.close()
            self.log = EventLog.open(self.directory / "events.jsonl", self._durability)
        records = self.log.recovery.records
        first = self.log.recovery.first_seq
        if snap is not None and first > 0:
            start, states = 0, snap[1]  # records are the tail after the snapshot's seq
        elif snap is not None and self._anchor is not None and self._anchor[1] <= self.log.recovery.size:
            # The log reaches the snapshot's offset but its record there is another: the log was cut and grew
            # again since, so the snapshot folded records the log no longer has. Fold the log from the start.
            start, states = 0, {p.name: p.initial() for p in self.projections}
        elif snap is not None and snap[0] < len(records):
            start, states = snap[0] + 1, snap[1]
        else:
            start, states = 0, {p.name: p.initial() for p in self.projections}
        folded = [states[p.name] for p in self.projections]
        Folder(self.projections).fold(itertools.islice(records, start, None), folded)
        states = {p.name: folded[i] for i, p in enumerate(self.projections)}
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
            else:
                # Leaving on an error is still an orderly exit: what was acknowledged (emit returns once a record
                # is in the buffer) reaches the file, e.g. the run.finished a failed run records before it raises.
                # Bounded and shielded: the error may be the log's own, or a cancellation.
                with anyio.move_on_after(self.reactor_grace_s, shield=True):
                    await self.log.drain()
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
        """Record ``body``; returns once it is in the log's buffer and every projection (not yet durable).

        Before launching an effect that leaves the process, await :meth:`durable`."""
        if self._tg is None:
            raise RuntimeError("Runtime.emit outside `async with runtime:` (no writer is running)")
        rec, _ = self.emit_nowait(body)
        await self.log.throttle(self.max_buffered)
        return rec

    async def durable(self, seq: int | None = None) -> None:
        """The effect barrier: return once record ``seq`` (default: every record emitted so far) is durable
        per the log's mode. Raises :class:`~engine.log.LogFatalError` if the writer failed."""
        target = self.log.next_seq - 1 if seq is None else seq
        if target <= self.log.durable_seq:
            return
        if self._tg is None:
            raise RuntimeError("Runtime.durable outside `async with runtime:` (no writer is running)")
        await self.log.wait_durable(target)

    async def emit_durable(self, body: EventBody) -> Recorded:
        """:meth:`emit`, then wait until the record (and every one before it) is durable."""
        rec = await self.emit(body)
        await self.durable(rec.seq)
        return rec

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` (read from projections) holds; re-checked after each durable batch."""
        while not predicate():
            changed = self._changed
            await changed.wait()

    def _publish(self, records: list[Recorded]) -> None:
        self._last_durable = records[-1].seq
        if (
            self.snapshot_every
            and not self._snapping
            and self._tg is not None
            and records[-1].seq - self._snap_seq >= self.snapshot_every
        ):
            self._snapping = True
            self._tg.start_soon(self._auto_snapshot)
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
        return state_hash(self._hashed, self.states)

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
        digest = encoded_hash({p.name: encoded[p.name] for p in self._hashed})
        anchor = self.log.anchor()
        offset, crc = (anchor[1], anchor[2]) if anchor is not None and anchor[0] == seq else (-1, "")
        await self.log.drain()
        await anyio.to_thread.run_sync(
            lambda: write_snapshot(self.directory, seq, encoded, digest, offset=offset, last_crc=crc)
        )
        return seq

    async def _auto_snapshot(self) -> None:
        try:
            self._snap_seq = await self.snapshot()
        finally:
            self._snapping = False
