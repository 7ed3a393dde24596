"""Virtual time for simulations: an asyncio event loop whose clock jumps to its next timer instead of waiting.

Code under simulation runs unchanged: ``anyio.sleep``, ``move_on_after`` and every timeout read the loop's
``time()``, which here is a virtual second count starting at 0. When no callback is ready, the loop polls
its sockets without blocking and, if nothing came in, moves the clock to the earliest scheduled timer. A
simulated day therefore takes as long as the CPU needs for its events, not a day.

The code under simulation must not wait on threads or real I/O with a timeout pending (the clock would jump
past them): the fleet simulation writes its log synchronously (durability ``none``) and keeps blobs in
memory for that reason.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["VirtualClock", "VirtualTimeLoop", "run_virtual"]

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout is None or timeout <= 0 or self.loop is None:
            # Nothing scheduled (timeout None) means only I/O can wake the loop: wait for it for real.
            return ready if ready or timeout is not None else super().select(None)
        self.loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time (seconds from 0)."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


class VirtualClock:
    """The :class:`engine.clock.Clock` of a simulated run: ``epoch`` plus the running loop's virtual time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, epoch: float = 1_764_460_800.0) -> None:
        self._loop = loop
        self.epoch = epoch

    def now(self) -> float:
        return self.epoch + self._loop.time()

    def elapsed(self) -> float:
        return self._loop.time()


def run_virtual(main: Callable[[VirtualClock], Awaitable[T]], epoch: float = 1_764_460_800.0) -> T:
    """Run ``main(clock)`` to completion on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        clock = VirtualClock(loop, epoch)
        coro: Any = main(clock)
        return loop.run_until_complete(coro)  # type: ignore[no-any-return]
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
