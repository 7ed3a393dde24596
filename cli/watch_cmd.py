"""``ait watch RUN [--once] [--exit-on-finish]``: a live terminal dashboard of a run, following its log."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("watch", help="live dashboard of a run: steps, episodes, queue, fleet, budget, rewards, errors")
    p.add_argument("run", help="run id, run directory or events.jsonl")
    p.add_argument("--once", action="store_true", help="print one frame of what is written now and exit")
    p.add_argument("--exit-on-finish", action="store_true", help="stop following once the run has finished")
    p.add_argument("--steps", type=int, default=8, help="outer steps shown in the reward table (default 8)")
    p.add_argument("--poll", type=float, default=0.5, help="seconds between reads of a quiet log (default 0.5)")
    p.add_argument("--width", type=int, default=None, help="render at this width (default: the terminal's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio
    from rich.console import Console

    from engine.log import LogCorrupted
    from engine.rundir import resolve_run
    from views.watch.live import follow

    run_dir = resolve_run(args.run, args.runs_root)
    console = Console(width=args.width) if args.width else Console()
    try:
        anyio.run(
            lambda: follow(
                run_dir.events,
                console,
                once=args.once,
                poll_s=args.poll,
                exit_on_finish=args.exit_on_finish,
                max_steps=args.steps,
            )
        )
    except LogCorrupted as exc:
        sys.stderr.write(f"ait watch: corrupt log: {exc}\n")
        return 2
    return 0
