"""Projections: pure, synchronous folds ``state = apply(state, event)`` over the log.

A projection owns a state value (any msgspec-encodable type, so that it can be snapshotted and
hashed). Handlers are picked by the event body's class through a dict, which is several times faster
than ``match`` on a million-event replay. A projection must be a deterministic function of the events:
no clock, randomness, environment, I/O or set iteration order inside a handler.

Handlers may update the state in place and return it: the runtime owns the state value and never
shares it, so the fold stays pure from the outside while a replay does not copy large dicts per event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import msgspec

from events import EventBody, Recorded

__all__ = ["Projection", "encoded_hash", "handles", "state_hash", "via_apply"]

S = TypeVar("S")
B = TypeVar("B", bound=EventBody)

_Handler = Callable[[Any, Any, Any], Any]


def handles(*types: type[EventBody]) -> Callable[[Callable[[Any, S, B], S]], Callable[[Any, S, B], S]]:
    """Mark a projection method as the handler of these event body types: ``(self, state, body) -> state``."""

    def mark(fn: Callable[[Any, S, B], S]) -> Callable[[Any, S, B], S]:
        fn.__dict__.setdefault("_handles", []).extend(types)
        return fn

    return mark


class Projection(Generic[S]):
    """Base class. Subclasses set ``name`` and ``state_type`` and implement :meth:`initial` and handlers."""

    name: ClassVar[str]
    state_type: ClassVar[Any]
    _dispatch: ClassVar[dict[type[EventBody], _Handler]]
    #: handlers that also need the record (seq, ts); keyed like ``_dispatch``
    wants_record: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dispatch: dict[type[EventBody], _Handler] = {}
        for base in reversed(cls.__mro__):
            for attr in vars(base).values():
                for t in getattr(attr, "_handles", ()):
                    dispatch[t] = attr
        cls._dispatch = dispatch

    def initial(self) -> S:
        raise NotImplementedError

    def apply(self, state: S, rec: Recorded) -> S:
        handler = self._dispatch.get(type(rec.event))
        if handler is None:
            return state
        self.current = rec
        result: S = handler(self, state, rec.event)
        return result

    # The record being applied, for handlers that need seq or ts (both come from the log, so replay is exact).
    current: Recorded

    def handler_for(self, event_type: type[EventBody]) -> _Handler | None:
        """The handler of ``event_type`` as ``(self, state, body) -> state`` (``self.current`` set first), or
        None when this projection ignores it. A projection with its own :meth:`apply` gets every type."""
        if type(self).apply is Projection.apply:
            return self._dispatch.get(event_type)
        return via_apply

    def encode_state(self, state: S) -> bytes:
        return _CANONICAL.encode(state)

    def decode_state(self, data: bytes) -> S:
        value: S = msgspec.json.decode(data, type=self.state_type)
        return value

    def fold(self, records: Iterable[Recorded], state: S | None = None) -> S:
        """Apply ``records`` in order, from ``state`` or the initial state."""
        s = self.initial() if state is None else state
        if type(self).apply is not Projection.apply:
            for rec in records:
                s = self.apply(s, rec)
            return s
        # apply() inlined: a replay folds every record through every projection, and the call per record
        # was a fifth of the fold's time (benchmarks/log_bench.py).
        handler_for = self._dispatch.get
        for rec in records:
            handler = handler_for(type(rec.event))
            if handler is not None:
                self.current = rec
                s = handler(self, s, rec.event)
        return s


def via_apply(self: Projection[Any], state: Any, body: EventBody) -> Any:
    """The handler :meth:`Projection.handler_for` gives for every type of a projection with its own ``apply``."""
    return self.apply(state, self.current)


_CANONICAL = msgspec.json.Encoder(order="deterministic")


def state_hash(projections: Iterable[Projection[Any]], states: Mapping[str, Any]) -> str:
    """A sha256 over every projection's canonical encoding, in name order. Live and replayed hashes must match."""
    return encoded_hash({p.name: p.encode_state(states[p.name]) for p in projections})


def encoded_hash(encoded: Mapping[str, bytes]) -> str:
    """:func:`state_hash` of states already encoded (name -> canonical encoding): a snapshot encodes once."""
    h = hashlib.sha256()
    for name in sorted(encoded):
        h.update(name.encode())
        h.update(b"\0")
        h.update(encoded[name])
        h.update(b"\0")
    return h.hexdigest()
