"""Run the server as a process: ``python -m adapters.openai_server --family calc_chain --policy reference``.

The first stdout line is the bound base URL (``http://127.0.0.1:PORT/v1``), flushed at once, so a
parent process (the validation probe runs this inside a sandbox network namespace) can read the port
chosen for ``--port 0``. The server runs until SIGINT or SIGTERM.

The reference policy knows the family's hidden eval tasks by default (``--split``/``--count`` pick
another generated set), or the tasks in ``--tasks-file`` (JSON lines of ``families.Task``, the form a
generated eval package bundles).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec
import structlog

from families import Task

from ._policies import NonsensePolicy, Policy, ReferencePolicy
from ._server import OpenAIServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m adapters.openai_server", description=__doc__.split("\n")[0])
    parser.add_argument("--policy", choices=("reference", "nonsense"), default="reference")
    parser.add_argument("--family", help="family whose reference solver to play (needed for --policy reference)")
    parser.add_argument("--split", default="hidden", help="split of the generated tasks the policy knows")
    parser.add_argument("--count", type=int, default=None, help="number of seeds (default: the hidden set size)")
    parser.add_argument("--tasks-file", type=Path, help="JSON lines of tasks instead of generated ones")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS choose")
    parser.add_argument("--model-name", default="local-policy")
    return parser


def read_tasks(path: Path) -> list[Task]:
    """Tasks from a JSON-lines file; a bad line is reported with its number."""
    decoder = msgspec.json.Decoder(Task)
    tasks = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                tasks.append(decoder.decode(line))
            except msgspec.DecodeError as exc:
                raise SystemExit(f"{path}:{lineno}: not a task: {exc}") from None
    return tasks


def _policy(args: argparse.Namespace) -> Policy:
    if args.policy == "nonsense":
        return NonsensePolicy()
    if not args.family:
        raise SystemExit("--policy reference needs --family")
    from families import HIDDEN_SIZE, get_family, hidden_tasks

    family = get_family(args.family)
    if args.tasks_file is not None:
        tasks = read_tasks(args.tasks_file)
    elif args.split == "hidden" and args.count is None:
        tasks = list(hidden_tasks(family))
    else:
        tasks = [family.generate(args.split, seed) for seed in range(args.count or HIDDEN_SIZE)]
    return ReferencePolicy(family, tasks)


async def _serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with OpenAIServer(_policy(args), host=args.host, port=args.port, model_name=args.model_name) as server:
        sys.stdout.write(server.base_url + "\n")
        sys.stdout.flush()
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    # Logs go to stderr: stdout carries only the URL line a parent process reads.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
