"""``ait tail RUN [--follow] [--type T] [--episode E] [--job J] [--json]``: print a run's events."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("tail", help="print a run's events human-readably (or raw with --json)")
    p.add_argument("run", help="run id, run directory or events.jsonl")
    p.add_argument("-f", "--follow", action="store_true", help="keep reading as the log grows")
    p.add_argument("--type", action="append", default=[], help="event type or prefix (repeatable): job, cost.*")
    p.add_argument("--episode", help="only events of this episode id")
    p.add_argument("--job", help="only events of this job id")
    p.add_argument("--json", action="store_true", help="pass raw JSON lines through (for jq)")
    p.add_argument("--poll", type=float, default=0.2, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    from engine.fmt import format_record
    from engine.log import LogCorrupted
    from engine.rundir import resolve_run
    from engine.tail import TailFilter, follow_lines

    run_dir = resolve_run(args.run, args.runs_root)
    keep = TailFilter(tuple(args.type), args.episode, args.job)
    out = sys.stdout

    async def main() -> None:
        async for raw, rec in follow_lines(run_dir.events, follow=args.follow, poll_s=args.poll):
            if keep(rec):
                out.write(raw.decode() if args.json else format_record(rec))
                out.write("\n")
                out.flush()

    try:
        anyio.run(main)
    except LogCorrupted as exc:
        sys.stderr.write(f"ait tail: corrupt log: {exc}\n")
        return 2
    return 0
