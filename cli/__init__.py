"""The ``ait`` command line: the composition root, the only place that wires concrete adapters in.

Each subcommand lives in its own module and registers itself on the parser; heavy imports happen inside
the command so that ``ait --help`` and ``ait tail`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cli import (
    baselines_cmd,
    costs_cmd,
    doctor_cmd,
    episode_cmd,
    holdout_cmd,
    pod_agent_cmd,
    publish_cmd,
    replay_cmd,
    report_cmd,
    tail_cmd,
    train_cmd,
    watch_cmd,
    worker_cmd,
)

__all__ = ["build_parser", "main"]

_COMMANDS = (
    train_cmd,
    holdout_cmd,
    episode_cmd,
    worker_cmd,
    pod_agent_cmd,
    baselines_cmd,
    replay_cmd,
    tail_cmd,
    watch_cmd,
    report_cmd,
    costs_cmd,
    doctor_cmd,
    publish_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ait",
        description="ai-trains-ai: an agent that writes RL training jobs, trained by RL on how much they helped.",
    )
    parser.add_argument("--runs-root", default="runs", help="where run directories live (default: runs/)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ait tail RUN | head`
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
