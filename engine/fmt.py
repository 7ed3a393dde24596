"""Human-readable formatting shared by every command that prints events, money or progress.

``ait tail`` (records), ``ait costs`` (ledger tables), ``ait watch`` (the dashboard) and ``ait report`` (the
Markdown report) all format dollars, durations, token counts, shares and times through these functions, so
one number reads the same wherever it appears. Nothing here knows the domain.
"""

from __future__ import annotations

import datetime as dt
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from events import Recorded

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = [
    "format_bar",
    "format_count",
    "format_duration",
    "format_hours",
    "format_pct",
    "format_record",
    "format_score",
    "format_ts",
    "format_usd",
    "format_value",
    "render_plain",
    "sparkline",
]

_MAX_VALUE = 80
_SPARKS = "▁▂▃▄▅▆▇█"


def format_ts(ts: float) -> str:
    """UTC wall time with milliseconds: ``2026-11-30 08:51:03.123``."""
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def format_usd(usd: float, *, places: int | None = None) -> str:
    """Dollars. ``places`` fixes the decimals (for table columns); otherwise enough to show small amounts."""
    if places is not None:
        return f"-${-usd:,.{places}f}" if usd < 0 else f"${usd:,.{places}f}"
    if abs(usd) >= 100:
        return f"${usd:,.2f}"
    if abs(usd) >= 0.01 or usd == 0:
        return f"${usd:.2f}" if abs(usd) >= 1 else f"${usd:.4f}"
    return f"${usd:.6f}"


def format_count(n: int) -> str:
    """An integer with thousands separators: ``1,234,567``."""
    return f"{n:,}"


def format_hours(seconds: float) -> str:
    """Seconds as hours with two decimals (pod hours, GPU hours): ``1.25``."""
    return f"{seconds / 3600.0:.2f}"


def format_duration(seconds: float | None) -> str:
    """A compact duration: ``42s``, ``3m05s``, ``2h07m``, ``3d04h``; ``-`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_pct(part: float, whole: float) -> str:
    """``part/whole`` as a percentage with no decimals; ``-`` when ``whole`` is 0."""
    if not whole:
        return "-"
    return f"{100.0 * part / whole:.0f}%"


def format_score(value: float | None, *, signed: bool = False) -> str:
    """A score or reward with three decimals (``+0.125`` when ``signed``); ``-`` when absent."""
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def format_bar(fraction: float, width: int = 20) -> str:
    """A text bar ``████████░░░░`` for a fraction in [0, 1] (clamped; over 1 shows a full bar)."""
    if not math.isfinite(fraction):
        fraction = 0.0
    filled = round(min(1.0, max(0.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def sparkline(values: Sequence[float], *, lo: float | None = None, hi: float | None = None) -> str:
    """One block character per value, scaled between ``lo`` and ``hi`` (default: the values' own range)."""
    if not values:
        return ""
    a = min(values) if lo is None else lo
    b = max(values) if hi is None else hi
    if b <= a:
        return _SPARKS[len(_SPARKS) // 2] * len(values)
    top = len(_SPARKS) - 1
    return "".join(_SPARKS[round((min(b, max(a, v)) - a) / (b - a) * top)] for v in values)


def format_value(value: Any, name: str = "") -> str:
    """One field of an event for ``ait tail``: dollars for ``*usd`` fields, compact JSON for structures."""
    if isinstance(value, float) and name.endswith("usd"):
        text = format_usd(value)
    elif isinstance(value, float):
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
    body = " ".join(f"{k}={format_value(v, k)}" for k, v in fields.items() if v not in ("", None, [], {}))
    return f"{rec.seq:>6}  {format_ts(rec.ts)}  {rec.event.type:<24} {body}"


def render_plain(renderable: RenderableType, width: int = 120) -> str:
    """A rich renderable (a table, a panel) as plain text: no colour, no terminal codes, fixed width."""
    from rich.console import Console  # here, not at the top: `ait tail` and `ait --help` start without rich

    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False, highlight=False).print(renderable)
    return out.getvalue()
