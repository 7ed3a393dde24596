"""A module logger that imports structlog on first use.

structlog (and what it pulls in) is a sizeable share of a short command's start-up (``ait replay`` spent
~0.1-0.5 CPU-s importing it on the 2-core dev machine) while modules a read-only replay imports for their
projections (the log, the budget rules, the training loop) log only on paths a replay never takes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lazy_logger"]


class _LazyLogger:
    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            import structlog

            # structlog's own lazy proxy: configuration (and capture_logs in tests) still applies per call.
            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attr)


def lazy_logger(name: str) -> Any:
    """``structlog.get_logger(name)``, imported when the logger is first used."""
    return _LazyLogger(name)
