"""A recorded event: the body plus the position and time the log gave it."""

from __future__ import annotations

import msgspec

from ._base import EventBody

__all__ = ["Recorded"]


class Recorded(msgspec.Struct, frozen=True, gc=False):
    """An event as it stands in the log: gap-free ``seq`` from 0, the time it was recorded, its body."""

    seq: int
    ts: float
    event: EventBody

    @property
    def type(self) -> str:
        return self.event.type
