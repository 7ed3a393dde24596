"""``ait replay RUN [--verify] [--until SEQ]``: rebuild every projection from the log and print its hash."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("replay", help="rebuild state from a run's log; print a summary and the state hash")
    p.add_argument("run", help="run id, run directory or events.jsonl")
    p.add_argument("--verify", action="store_true", help="recompute derived events and list any that differ")
    p.add_argument("--until", type=int, default=None, metavar="SEQ", help="stop after this seq")
    p.add_argument("--hash-only", action="store_true", help="print only the state hash")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from engine.log import LogCorrupted
    from engine.replay import replay
    from engine.rundir import resolve_run
    from handlers.registry import default_projections

    run_dir = resolve_run(args.run, args.runs_root)
    try:
        result = replay(run_dir.events, default_projections(), until=args.until, verify=args.verify)
    except LogCorrupted as exc:
        from rich.console import Console

        Console(highlight=False, soft_wrap=True).print(f"[red]corrupt log:[/red] {exc}")
        return 2
    if args.hash_only:
        # Plain output, without rich: its import is a large share of a short replay's process (a script's use).
        sys.stdout.write(f"{result.state_hash}\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    from engine.fmt import format_ts

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"run        {run_dir.run_id}")
    console.print(f"events     {result.count} (last seq {result.last_seq})")
    if result.first_ts is not None and result.last_ts is not None:
        console.print(f"span       {format_ts(result.first_ts)} .. {format_ts(result.last_ts)} UTC")
    if result.corrupt_line:
        console.print(
            f"[red]corrupt record at line {result.corrupt_line} (the last complete line, {result.corrupt_bytes} "
            f"bytes): {result.corrupt_reason}; the log ends before it, and a writer reopening the log sets its "
            "bytes aside beside it[/red]"
        )
    if result.torn_bytes:
        console.print(f"[yellow]torn tail  {result.torn_bytes} bytes after the last complete line (ignored)[/yellow]")
    table = Table("event type", "count", box=None)
    for name, n in sorted(result.by_type.items()):
        table.add_row(name, str(n))
    console.print(table)
    console.print(f"state hash {result.state_hash}")
    if args.verify:
        console.print(f"verified   {result.verified} derived events, {len(result.mismatches)} differ")
        for m in result.mismatches:
            diffs = ", ".join(f"{k}: recorded {a!r} != recomputed {b!r}" for k, (a, b) in m.fields.items())
            console.print(f"[red]  seq {m.seq} {m.type}: {diffs}[/red]")
        return 1 if result.mismatches else 0
    return 0
