"""Progress bars for long commands (episodes, baselines, local training, holdout, reading a big log).

One context manager, one look::

    from engine.progress import progress

    with progress("baselines", total=len(pairs), unit="evals") as bar:
        for family, model in pairs:
            ...
            bar.advance()                      # or bar.update(completed=n, total=m, description="...")

    for item in track(items, "holdout episodes"):   # the same, for a plain loop
        ...

The bar draws on stderr only when stderr is a terminal, so piped output, CI logs and tests stay clean; pass
``enabled=True`` (or a recording ``Console``) to force it. A disabled bar still counts (``bar.completed``), so
callers never branch on whether it is shown. ``unit="bytes"`` shows sizes and transfer speed instead of
``n/total``. Bars never go to stdout: stdout stays for a command's result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

__all__ = ["Bar", "progress", "track"]

T = TypeVar("T")


class Bar:
    """A handle on one bar. Works the same whether or not the bar is drawn."""

    def __init__(self, owner: Progress | None, task: TaskID | None, total: float | None) -> None:
        self._owner = owner
        self._task = task
        self.total = total
        self.completed = 0.0

    def advance(self, amount: float = 1.0) -> None:
        self.completed += amount
        if self._owner is not None and self._task is not None:
            self._owner.advance(self._task, amount)

    def update(
        self, *, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        if completed is not None:
            self.completed = completed
        if total is not None:
            self.total = total
        if self._owner is not None and self._task is not None:
            self._owner.update(self._task, completed=completed, total=total, description=description)


def _columns(unit: str, total: float | None) -> list[ProgressColumn | str]:
    cols: list[ProgressColumn | str] = [SpinnerColumn(), TextColumn("[progress.description]{task.description}")]
    if total is None:  # unknown length: a pulsing bar and elapsed time only
        return [*cols, BarColumn(), TimeElapsedColumn()]
    if unit == "bytes":
        return [*cols, BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()]
    count = MofNCompleteColumn()
    return [*cols, BarColumn(), count, TextColumn(unit), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]


@contextmanager
def progress(
    description: str,
    total: float | None = None,
    *,
    unit: str = "",
    console: Console | None = None,
    enabled: bool | None = None,
    transient: bool = False,
) -> Iterator[Bar]:
    """A progress bar for the duration of the block (see the module docstring)."""
    con = console or Console(stderr=True)
    show = con.is_terminal if enabled is None else enabled
    if not show:
        yield Bar(None, None, total)
        return
    with Progress(*_columns(unit, total), console=con, transient=transient) as owner:
        task = owner.add_task(description, total=total)
        yield Bar(owner, task, total)


def track(
    items: Iterable[T],
    description: str,
    *,
    total: float | None = None,
    unit: str = "",
    console: Console | None = None,
    enabled: bool | None = None,
) -> Iterator[T]:
    """Iterate ``items`` with a bar; ``total`` defaults to ``len(items)`` when it has one."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with progress(description, total, unit=unit, console=console, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.advance()
