"""The ``ait`` command line: the composition root, the only place that wires concrete adapters in.

Each subcommand lives in its own module and registers itself on the parser; heavy imports happen inside
the command so that ``ait --help`` and ``ait tail`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from adapters.freed_memory import keep_freed_memory
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
from engine.writer_lock import RunLocked

__all__ = ["build_parser", "main", "user_error"]

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
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show log lines and the libraries' own output on the console"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    keep_freed_memory()  # before any command imports torch (adapters/freed_memory.py)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except RunLocked as exc:  # a second writer on a run (engine/writer_lock.py): one line, nothing written
        sys.stderr.write(f"ait {args.command}: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ait tail RUN | head`
        return 0
    except Exception as exc:
        # A mistake in what the user typed or pointed at is one line and exit 2, on every subcommand; anything
        # else is a bug and keeps its traceback.
        message = user_error(exc)
        if message is None:
            raise
        sys.stderr.write(f"ait {args.command}: {message}\n")
        return 2
    return code


def user_error(exc: BaseException) -> str | None:
    """The one-line message for an error the user can fix (a missing run or file, an unreadable config, a
    missing key), or None for anything else. The messages already name the file, field or run."""
    from engine.log import LogCorrupted
    from handlers.ports.policy import PolicyError
    from handlers.reward.baselines import BaselinesError
    from handlers.training.config import ConfigError

    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    if isinstance(exc, OSError) and exc.filename is None and exc.args:
        return str(exc.args[0])  # raised with a message of ours (e.g. "no run at 'x': ...")
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, ConfigError | BaselinesError | PolicyError | LogCorrupted):
        return str(exc).replace("\n", " ")
    return None


if __name__ == "__main__":
    sys.exit(main())
