"""``ait report RUN [--out DIR]``: a Markdown report of a run with PNG plots and CSV tables (handlers/report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("report", help="write a Markdown report with PNG plots and CSVs of a run")
    p.add_argument("run", help="run id, run directory or events.jsonl")
    p.add_argument("--out", default=None, help="output directory (default: <run>/report/)")
    p.add_argument("--wandb", default=None, metavar="PROJECT", help="also mirror the run's metrics to W&B")
    p.add_argument(
        "--grid",
        default=None,
        metavar="JSON",
        help="CPU replica: the grid of benchmarks/replica_grid.py (default examples/replica/grid.json if present)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.log import LogCorrupted
    from engine.rundir import resolve_run
    from views.report import write_report
    from views.report.replica import GridError

    run_dir = resolve_run(args.run, args.runs_root)
    out = Path(args.out) if args.out else run_dir.root / "report"
    console = Console(stderr=True)
    try:
        files = write_report(run_dir.root, out, console=console, grid=Path(args.grid) if args.grid else None)
    except LogCorrupted as exc:
        sys.stderr.write(f"ait report: corrupt log: {exc}\n")
        return 2
    except GridError as exc:  # a --grid file that does not fit
        sys.stderr.write(f"ait report: --grid {exc}\n")
        return 2
    except ModuleNotFoundError as exc:
        sys.stderr.write(f"ait report: {exc.name} is not installed (the report's plots need matplotlib)\n")
        return 2
    if args.wandb:
        from adapters.wandb_sink import WandbConfig, WandbUnavailable, mirror_run

        try:
            mirror_run(run_dir.events, WandbConfig(project=args.wandb))
        except WandbUnavailable as exc:
            sys.stderr.write(f"ait report: {exc}\n")
            return 2
    sys.stdout.write(f"{files.markdown}\n")
    for p in [*files.plots, *files.csvs]:
        sys.stdout.write(f"{p}\n")
    return 0
