"""The follow loop behind ``ait watch``: read the log as it grows, fold, redraw.

With ``once`` it reads what is written now, prints one frame and returns (a finished run, a snapshot of a
live one). Otherwise it redraws through ``rich.live.Live`` whenever new records arrive (and once a second for
the "last event" age), until stopped, or until ``run.finished`` when ``exit_on_finish``. A long log is read
first with a progress bar (on a terminal), then followed. ``on_view`` sees every frame's view (for tests and
for other sinks).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live

from engine.progress import progress
from views.watch.folder import RunFolder
from views.watch.render import render
from views.watch.view import DashboardView, build_view

__all__ = ["follow", "frame", "read_all"]

_REDRAW_IDLE_S = 1.0


def frame(folder: RunFolder, *, wall_now: float | None = None, max_steps: int = 8) -> DashboardView:
    return build_view(
        folder.states,
        events=folder.events,
        first_ts=folder.first_ts,
        last_ts=folder.last_ts,
        wall_now=wall_now,
        max_steps=max_steps,
    )


def read_all(folder: RunFolder, console: Console | None = None) -> int:
    """Fold everything written so far, with a progress bar over the file's bytes when it is big."""
    try:
        size = folder.path.stat().st_size
    except FileNotFoundError:
        return 0
    total = 0
    with progress("reading the log", total=size, unit="bytes", console=console, transient=True) as bar:
        while n := folder.poll(4 << 20):
            total += n
            bar.update(completed=folder.reader.offset)
    return total


async def follow(
    events: Path,
    console: Console,
    *,
    once: bool = False,
    poll_s: float = 0.5,
    exit_on_finish: bool = False,
    max_steps: int = 8,
    stop: Callable[[], bool] = lambda: False,
    on_view: Callable[[DashboardView], None] | None = None,
    progress_console: Console | None = None,
) -> RunFolder:
    folder = RunFolder(events)
    await anyio.to_thread.run_sync(read_all, folder, progress_console)
    if once:
        view = frame(folder, max_steps=max_steps)
        if on_view is not None:
            on_view(view)
        console.print(render(view, console.width))
        return folder
    view = frame(folder, wall_now=time.time(), max_steps=max_steps)
    if on_view is not None:
        on_view(view)
    with Live(render(view, console.width), console=console, auto_refresh=False, redirect_stdout=False) as live:
        drawn = time.monotonic()
        while not stop() and not (exit_on_finish and folder.finished):
            n = await anyio.to_thread.run_sync(folder.poll)
            if n or time.monotonic() - drawn >= _REDRAW_IDLE_S:
                view = frame(folder, wall_now=time.time(), max_steps=max_steps)
                if on_view is not None and n:
                    on_view(view)
                live.update(render(view, console.width), refresh=True)
                drawn = time.monotonic()
            if not n:
                await anyio.sleep(poll_s)
    return folder
