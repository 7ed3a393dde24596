"""The base of every event body, the request/outcome pair for side effects, and the type registry.

An event *body* is a frozen msgspec Struct. Its wire name (``area.what_happened``) and schema version
are class-level metadata attached by :func:`event`, which also registers the class so that the codec
can decode a log line whose envelope names it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import msgspec

__all__ = [
    "EventBody",
    "Outcome",
    "Request",
    "UnknownEventType",
    "Upcaster",
    "event",
    "event_class",
    "registered_types",
    "upcaster",
    "upcasters_for",
]


class EventBody(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every event body. Subclasses are registered with :func:`event`."""

    type: ClassVar[str] = ""
    version: ClassVar[int] = 1


class Request(EventBody, frozen=True, kw_only=True):
    """The first half of a side effect: ``XRequested(key)``.

    ``key`` is the idempotency key. Leave it empty when emitting: the runtime fills it with
    ``"<run_id>:<seq>"`` so that the same request gets the same key on every retry and after resume.
    """

    key: str = ""


class Outcome(EventBody, frozen=True, kw_only=True):
    """The second half of a side effect: ``XCompleted(key)`` or ``XFailed(key)``."""

    key: str


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_TYPES: dict[str, type[EventBody]] = {}
# (type name, from version) -> function turning a body of that version into one of version + 1
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}

E = TypeVar("E", bound=type[EventBody])


class UnknownEventType(KeyError):
    """A log names an event type this code does not know."""


def event(name: str, *, version: int = 1) -> Callable[[E], E]:
    """Class decorator: give an event body its wire name and schema version, and register it."""

    def register(cls: E) -> E:
        if name in _TYPES and _TYPES[name] is not cls:
            raise ValueError(f"event type {name!r} registered twice ({_TYPES[name].__name__}, {cls.__name__})")
        if version < 1:
            raise ValueError(f"event type {name!r}: version must be >= 1")
        cls.type = name
        cls.version = version
        _TYPES[name] = cls
        return cls

    return register


def upcaster(name: str, *, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function that rewrites a version ``from_version`` body of ``name`` into the next version.

    Old logs keep replaying after a schema change: the codec chains upcasters from the recorded
    version up to the current one before building the Struct.
    """

    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(name, from_version)] = fn
        return fn

    return register


def unregister(name: str) -> None:
    """Forget an event type and its upcasters (for types a test defines for itself; a real type stays)."""
    _TYPES.pop(name, None)
    for key in [k for k in _UPCASTERS if k[0] == name]:
        del _UPCASTERS[key]


def event_class(name: str) -> type[EventBody]:
    try:
        return _TYPES[name]
    except KeyError:
        raise UnknownEventType(name) from None


def registered_types() -> dict[str, type[EventBody]]:
    """Every registered event type, by wire name (a copy, sorted by name)."""
    return dict(sorted(_TYPES.items()))


def upcasters_for(name: str, from_version: int, to_version: int) -> list[Upcaster]:
    """The chain of upcasters taking ``name`` from ``from_version`` to ``to_version``."""
    chain = []
    for v in range(from_version, to_version):
        fn = _UPCASTERS.get((name, v))
        if fn is None:
            raise LookupError(f"no upcaster for {name!r} from version {v} to {v + 1}")
        chain.append(fn)
    return chain
