"""Human-readable formatting shared by every command that prints events or money (tail, costs, watch)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from events import Recorded

__all__ = ["format_record", "format_ts", "format_usd", "format_value"]

_MAX_VALUE = 80


def format_ts(ts: float) -> str:
    """UTC wall time with milliseconds: ``2026-11-30 08:51:03.123``."""
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def format_usd(usd: float) -> str:
    if abs(usd) >= 100:
        return f"${usd:,.2f}"
    if abs(usd) >= 0.01 or usd == 0:
        return f"${usd:.2f}" if abs(usd) >= 1 else f"${usd:.4f}"
    return f"${usd:.6f}"


def format_value(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, str):
        text = value if value and " " not in value else repr(value)
    elif isinstance(value, (msgspec.Struct, list, dict)):
        text = msgspec.json.encode(value).decode()
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def format_record(rec: Recorded) -> str:
    """``   12  2026-11-30 08:51:03.123  job.queued            job_id=j1 family=calc_chain ...``"""
    fields = msgspec.structs.asdict(rec.event)
    body = " ".join(f"{k}={format_value(v)}" for k, v in fields.items() if v not in ("", None, [], {}))
    return f"{rec.seq:>6}  {format_ts(rec.ts)}  {rec.event.type:<24} {body}"
