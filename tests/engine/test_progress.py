"""Progress bars: drawn on a terminal, silent elsewhere, counting either way."""

from __future__ import annotations

import io

from rich.console import Console

from engine.progress import progress, track


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100, color_system=None), out


def test_a_bar_on_a_terminal_shows_its_description_and_count() -> None:
    console, out = _terminal()
    with progress("baselines", total=3, unit="evals", console=console) as bar:
        for _ in range(3):
            bar.advance()
    text = out.getvalue()
    assert "baselines" in text and "3/3" in text and "evals" in text
    assert bar.completed == 3


def test_off_a_terminal_nothing_is_drawn_but_it_still_counts() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with progress("holdout", total=10, console=console) as bar:
        bar.advance(4)
        bar.update(completed=7, total=12)
    assert out.getvalue() == ""
    assert (bar.completed, bar.total) == (7, 12)


def test_bytes_and_unknown_totals() -> None:
    console, out = _terminal()
    with progress("reading the log", total=2048, unit="bytes", console=console) as bar:
        bar.update(completed=2048)
    assert "2.0/2.0 kB" in out.getvalue()
    console, out = _terminal()
    with progress("waiting", console=console) as bar:
        bar.advance()
    assert "waiting" in out.getvalue()


def test_track_yields_every_item() -> None:
    console, out = _terminal()
    assert list(track(["a", "b"], "episodes", console=console)) == ["a", "b"]
    assert "2/2" in out.getvalue()
