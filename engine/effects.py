"""The side-effect protocol's bookkeeping: which requests have no outcome yet.

A side effect is ``XRequested(key)`` -> effect -> ``XCompleted(key)`` / ``XFailed(key)``. The key is
``"<run_id>:<seq of the request>"``, so a resumed run re-issues exactly the requests that have no
outcome, with the same key, and never repeats one that has. This projection is always installed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events import EventBody, Outcome, Recorded, Request
from events.codec import RecordCodec

from .projection import Projection

__all__ = ["EffectsProjection", "PendingEffect", "pending_requests"]

_ENC = msgspec.json.Encoder()


class PendingEffect(msgspec.Struct, frozen=True):
    seq: int
    type: str
    body: msgspec.Raw


class EffectsProjection(Projection[dict[str, PendingEffect]]):
    name = "effects"
    state_type = dict[str, PendingEffect]

    def initial(self) -> dict[str, PendingEffect]:
        return {}

    def handler_for(self, event_type: type[EventBody]) -> Any:
        # By class hierarchy, once per type (the Folder caches it): most events are neither.
        if issubclass(event_type, Request):
            return EffectsProjection._request
        if issubclass(event_type, Outcome):
            return EffectsProjection._outcome
        return None

    def _request(self, state: dict[str, PendingEffect], ev: Request) -> dict[str, PendingEffect]:
        state[ev.key] = PendingEffect(self.current.seq, ev.type, msgspec.Raw(_ENC.encode(ev)))
        return state

    def _outcome(self, state: dict[str, PendingEffect], ev: Outcome) -> dict[str, PendingEffect]:
        state.pop(ev.key, None)
        return state

    def apply(self, state: dict[str, PendingEffect], rec: Recorded) -> dict[str, PendingEffect]:
        # Not dispatched by class: every Request / Outcome subclass counts, whatever its domain.
        ev = rec.event
        if isinstance(ev, Request):
            state[ev.key] = PendingEffect(rec.seq, ev.type, msgspec.Raw(_ENC.encode(ev)))
        elif isinstance(ev, Outcome):
            state.pop(ev.key, None)
        return state


def pending_requests(state: dict[str, PendingEffect], codec: RecordCodec | None = None) -> list[Recorded]:
    """The requests without an outcome, as records in seq order (their ``ts`` is not kept: 0.0)."""
    c = codec or RecordCodec()
    out: list[Recorded] = []
    for p in sorted(state.values(), key=lambda p: p.seq):
        body: EventBody = c.decode_body(p.type, p.body)
        out.append(Recorded(p.seq, 0.0, body))
    return out
