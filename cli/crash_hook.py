"""A test hook for crash-resume tests: SIGKILL this process once a given event is durable.

``AIT_KILL_AFTER_SEQ=N ait train ...`` dies right after event N reaches the log, at a boundary a real crash
could hit; the tests then resume the run and compare it with an uninterrupted one.
"""

from __future__ import annotations

import os
import signal
from typing import Any

__all__ = ["KILL_ENV", "kill_after"]

KILL_ENV = "AIT_KILL_AFTER_SEQ"


def kill_after(seq: int) -> Any:
    """A reactor that SIGKILLs this process once event ``seq`` is durable (tests: ``AIT_KILL_AFTER_SEQ``)."""

    async def reactor(rt: Any, stream: Any) -> None:
        async for rec in stream:
            if rec.seq >= seq:
                os.kill(os.getpid(), signal.SIGKILL)

    return reactor
