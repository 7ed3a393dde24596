"""``ait costs [--by run|kind|day|item] [--ledger PATH]``: summarise the cross-run cost ledger."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("costs", help="summarise spend across runs from runs/costs.jsonl")
    p.add_argument("--by", default="run", choices=["run", "kind", "day", "item"], help="group rows by this")
    p.add_argument("--ledger", default=None, help="ledger path (default: <runs-root>/costs.jsonl)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from handlers.budget.costs_ledger import LedgerError, costs_command

    ledger = Path(args.ledger) if args.ledger else Path(args.runs_root) / "costs.jsonl"
    try:
        sys.stdout.write(costs_command(ledger, args.by))
    except LedgerError as exc:
        sys.stderr.write(f"ait costs: {exc}\n")
        return 2
    return 0
