"""The shared formatting of tail, costs, watch and report."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.fmt import (
    format_bar,
    format_duration,
    format_pct,
    format_record,
    format_score,
    format_usd,
    render_plain,
    sparkline,
)
from events import CostSettled, Recorded


def test_usd_auto_and_fixed_places() -> None:
    assert format_usd(1234.5) == "$1,234.50"
    assert format_usd(0.25) == "$0.2500"
    assert format_usd(0.000123) == "$0.000123"
    assert format_usd(3.75, places=4) == "$3.7500"
    assert format_usd(-2.5, places=2) == "-$2.50"


def test_durations() -> None:
    assert [format_duration(s) for s in (0, 42, 185, 7620, 273600)] == ["0s", "42s", "3m05s", "2h07m", "3d04h"]
    assert format_duration(None) == "-" and format_duration(float("nan")) == "-"


def test_pct_and_score() -> None:
    assert format_pct(1, 3) == "33%" and format_pct(1, 0) == "-"
    assert format_score(0.1234) == "0.123" and format_score(-0.1, signed=True) == "-0.100"
    assert format_score(None) == "-"


@given(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=1, max_value=60))
def test_bar_always_has_its_width(fraction: float, width: int) -> None:
    bar = format_bar(fraction, width)
    assert len(bar) == width and set(bar) <= {"█", "░"}


@given(st.lists(st.floats(min_value=-10, max_value=10), max_size=40))
def test_sparkline_one_block_per_value_ordered_like_the_values(values: list[float]) -> None:
    line = sparkline(values)
    assert len(line) == len(values)
    blocks = "▁▂▃▄▅▆▇█"
    for (a, ca), (b, cb) in zip(zip(values, line, strict=True), zip(values[1:], line[1:], strict=True), strict=False):
        if a < b:
            assert blocks.index(ca) <= blocks.index(cb)


def test_tail_shows_money_fields_as_dollars() -> None:
    rec = Recorded(3, 0.0, CostSettled(reservation_id="res-1", kind="job", ref="pod:p0", usd=0.25, seconds=12.0))
    line = format_record(rec)
    assert "usd=$0.2500" in line and "seconds=12" in line and "cost.settled" in line


def test_render_plain_has_no_terminal_codes() -> None:
    from rich.table import Table

    t = Table("a", "b")
    t.add_row("[bold]x[/bold]", "1")
    text = render_plain(t, width=40)
    assert "\x1b[" not in text and "x" in text and max(len(line) for line in text.splitlines()) <= 40
