"""Structured logs, configured in one place for every ``ait`` command.

:func:`configure_logging` routes structlog (and the standard library's ``logging``, which the libraries we use
log through) to:

- ``runs/<run>/logs.jsonl`` when a run directory is given: one JSON object per line with ``timestamp`` (UTC,
  ISO 8601), ``level``, ``logger``, ``event`` and the call's fields, for ``jq`` and for a later audit;
- the console (stderr): a human-readable, coloured renderer on a terminal; plain ``key=value`` lines when stderr
  is not a terminal; JSON lines with ``console_format="json"``; nothing with ``"none"``.

Secrets never reach either: the value of any field named like a secret (``api_key``, ``token``, ``password``,
``secret``, ``authorization``, ...; not ``input_tokens``) is replaced by ``[redacted]``, also inside nested
mappings, and bearer tokens or ``sk-...``-style keys inside any string are masked.

Call it once at the start of a command that writes a run (``configure_logging(run_dir=run.root)``), before the
first log call; read-only commands (tail, watch, report) keep the console default. :func:`reset_logging` undoes
it (tests).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Final, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["configure_logging", "redact_secrets", "reset_logging"]

ConsoleFormat = Literal["auto", "human", "json", "none"]

REDACTED: Final = "[redacted]"
_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|apikey|token|secret|secret_key|password|passwd|authorization|auth|bearer|credentials?|cookie)$",
    re.IGNORECASE,
)
_SECRET_TEXT = (
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer " + REDACTED),
    (re.compile(r"\b(sk|rpa|rk|pk|hf|wandb)[-_][A-Za-z0-9_-]{16,}"), REDACTED),
)
_MARK = "_ait_logging"  # set on the handlers we install, so a second configure replaces them
_saved_level: list[int] = []  # the root level before configure_logging, restored by reset_logging


def _clean(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        for pattern, repl in _SECRET_TEXT:
            value = pattern.sub(repl, value)
        return value
    if isinstance(value, MutableMapping) and depth < 4:
        return {
            k: REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) else _clean(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple) and depth < 4:
        return type(value)(_clean(v, depth + 1) for v in value)
    return value


def redact_secrets(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: mask secret-named fields and secret-looking text (see the module docstring)."""
    for key in list(event_dict):
        event_dict[key] = REDACTED if _SECRET_KEY.search(key) else _clean(event_dict[key])
    return event_dict


def _shared() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.StackInfoRenderer(),
        redact_secrets,
    ]


def _formatter(renderer: Processor, *, exceptions: bool) -> logging.Formatter:
    processors: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if exceptions:
        processors.append(structlog.processors.format_exc_info)
    return structlog.stdlib.ProcessorFormatter(foreign_pre_chain=_shared(), processors=[*processors, renderer])


def reset_logging() -> None:
    """Remove (and close) the handlers :func:`configure_logging` installed; structlog back to its defaults."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _MARK, False):
            root.removeHandler(h)
            h.close()
    if _saved_level:
        root.setLevel(_saved_level.pop())
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def configure_logging(
    *,
    run_dir: Path | str | None = None,
    level: str = "info",
    console: TextIO | None = None,
    console_format: ConsoleFormat = "auto",
    console_level: str | None = None,
    **context: Any,
) -> Path | None:
    """Set up logging for this process; returns the JSON-lines file, if any. ``context`` (e.g. ``run_id=``) is
    bound to every line from here on."""
    reset_logging()
    level_no = logging.getLevelName(level.upper())
    if not isinstance(level_no, int):
        raise ValueError(f"log level {level!r}: expected debug, info, warning, error or critical")
    root = logging.getLogger()
    _saved_level.append(root.level)
    root.setLevel(level_no)
    path: Path | None = None
    if run_dir is not None:
        path = Path(run_dir) / "logs.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(path, mode="a", encoding="utf-8")
        file_handler.setFormatter(_formatter(structlog.processors.JSONRenderer(sort_keys=True), exceptions=True))
        setattr(file_handler, _MARK, True)
        root.addHandler(file_handler)
    if console_format != "none":
        stream = console if console is not None else sys.stderr
        tty = bool(getattr(stream, "isatty", lambda: False)())
        renderer: Processor
        if console_format == "json":
            renderer = structlog.processors.JSONRenderer(sort_keys=True)
        else:
            renderer = structlog.dev.ConsoleRenderer(colors=tty if console_format == "auto" else False)
        console_handler = logging.StreamHandler(stream)
        if console_level is not None:
            # e.g. a command that prints its own summary keeps only warnings on the terminal; the file gets all.
            console_handler.setLevel(logging.getLevelName(console_level.upper()))
        console_handler.setFormatter(_formatter(renderer, exceptions=console_format == "json"))
        setattr(console_handler, _MARK, True)
        root.addHandler(console_handler)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    if context:
        structlog.contextvars.bind_contextvars(**context)
    return path
