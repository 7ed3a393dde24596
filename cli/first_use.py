"""First use of ``ait episode`` on a machine: freezing the CPU baselines the job will be compared with, visibly.

The hidden sets derive from this machine's eval key, so no committed file can hold their baselines: the first
episode of a family scores the tiny base models on them. Only what the job can use is frozen: the family of
the task, the base models its spec allows, and the hidden tasks the job will be scored on (a smoke run's
``eval_limit`` subset is frozen apart, in ``cpu-n<N>.json``, so ``best_pre`` and ``post`` always cover the
same tasks). Each model is loaded once, its episodes are played in batches, and a progress bar names the
model, the family, n, the rate and the time left. The libraries' own noise (weight-loading bars,
their info lines) is hidden by :func:`cli.library_noise.quiet_libraries` unless ``-v`` asked for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from events import BaselineFrozen

__all__ = ["baselines_path_for", "entries_n", "freeze_with_progress"]


def baselines_path_for(limit: int | None) -> Path:
    """The CPU baselines file: ``cpu.json`` for the full hidden sets, ``cpu-n<N>.json`` for a smoke subset."""
    from handlers.reward.baselines import default_baselines_path

    return default_baselines_path("cpu" if limit is None else f"cpu-n{limit}")


def freeze_with_progress(
    path: Path,
    family: str,
    models: Sequence[str],
    fingerprint: str,
    *,
    limit: int | None,
    seed: int,
    console: Console,
) -> list[BaselineFrozen]:
    """Freeze ``family`` x ``models`` not frozen yet in ``path`` with a progress bar; returns the file's events."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from cli import baselines_cmd
    from handlers.reward.baselines import BaselineEntry, freeze_baselines, frozen_events

    columns = (
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    n_text = "all" if limit is None else str(limit)
    console.print(
        f"first use: freezing the CPU baselines for {family} ({len(models)} model(s), {n_text} hidden tasks, "
        f"eval key {fingerprint}) -> {path}"
    )
    # A bar only on a terminal: written to a file or a pipe, rich draws the bar once, at the end, cut to 80
    # columns ("... in 14 s 0… ETA 0:…"); there each pair gets one plain line when it is scored instead.
    live = console.is_terminal
    with Progress(*columns, console=console, transient=False) if live else contextlib.nullcontext() as bar:
        tasks: dict[tuple[str, str], Any] = {}
        started: dict[tuple[str, str], float] = {}

        def on_turn(fam: str, model: str) -> Any:
            # Called as the pair starts (the model loads first): its bar appears now, then moves per turn.
            started[fam, model] = time.monotonic()
            if bar is None:
                return None
            tasks[fam, model] = bar.add_task(f"baseline {model} on {fam}", total=None, status="starting")

            def hook(turn: int, max_turns: int, finished: int, total: int) -> None:
                rate = finished / max(time.monotonic() - started[fam, model], 1e-6)
                status = f"turn {turn}/{max_turns}: {finished}/{total} tasks done, {rate:.1f} tasks/s"
                bar.update(tasks[fam, model], total=max_turns, completed=turn, status=status)

            return hook

        inner = baselines_cmd.cpu_score_fn(seed=seed, limit=limit, on_turn=on_turn)

        async def score(fam: str, model: str) -> BaselineEntry:
            entry: BaselineEntry = await inner(fam, model)
            if (fam, model) in started:
                took = time.monotonic() - started[fam, model]
                done = f"score {entry.score:.3f} (n={entry.n}) in {took:.0f} s"
                if bar is None:
                    console.print(f"baseline {model} on {fam}: {done}")
                else:
                    bar.update(tasks[fam, model], total=1, completed=1, status=done)
            else:  # not scored now: the score this machine took of the same weights before (the score memo)
                console.print(f"baseline {model} on {fam}: score {entry.score:.3f} (n={entry.n}), taken before here")
            return entry

        asyncio.run(
            freeze_baselines(
                score,
                families=[family],
                models=list(models),
                inner="cpu",
                out_path=path,
                created=dt.datetime.now(dt.UTC).date().isoformat(),
                key_fingerprint=fingerprint,
            )
        )
    return frozen_events(path, key_fingerprint=fingerprint)


def entries_n(path: Path, family: str) -> dict[str, int]:
    """``{model: n}`` of the family's frozen entries in ``path`` (for the result line's n)."""
    from handlers.reward.baselines import load_baselines_file

    f = load_baselines_file(path)
    return {model: e.n for model, e in f.scores.get(family, {}).items()}
