"""Derived events and how to recompute them: the registry behind ``ait replay --verify``.

Some events carry values computed from earlier ones (a reward from a job result and a frozen baseline).
The handler that computes such a value registers a *deriver* for the event type: given the recorded
body and the projection states just before it, return the body today's code would have emitted.
``replay --verify`` compares the two and lists every event whose recorded value differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from events import EventBody

__all__ = ["Deriver", "derivers", "register_deriver"]

Deriver = Callable[[EventBody, Mapping[str, Any]], EventBody]

_DERIVERS: dict[type[EventBody], Deriver] = {}


def register_deriver(event_type: type[EventBody], fn: Deriver) -> Deriver:
    _DERIVERS[event_type] = fn
    return fn


def derivers() -> dict[type[EventBody], Deriver]:
    return dict(_DERIVERS)
