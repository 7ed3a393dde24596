"""``ait pod-agent --port 0 --token-file F --trainer standin``: serve the pod-agent protocol on this machine.

Prints ``ait pod-agent: listening on <url> (trainer <name>)`` once it accepts connections. The bearer token
comes from a file (``--token-file``) or an environment variable (``--token-env``), never from the command line.
Only light modules are imported before the trainer is chosen, so a pod is answering within a second.

``--self-check`` (default ``auto``): what the agent checks before it takes a job. ``auto`` is ``prime_rl`` for the
prime-rl trainer (GPU, prime-rl at the pinned commit, vLLM, the scoring venv, this project's version:
:mod:`adapters.prime_rl.selfcheck`, on the installs under ``--trainer-opt root``, else ``$AIT_ROOT``, else
``/opt/ait``) and ``none`` for every other trainer (the CPU trainer and the stand-in need nothing: no check runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.pod.core import SelfCheckFn
    from handlers.ports.inner_trainer import InnerTrainer

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("pod-agent", help="run the pod agent: the authenticated HTTP service that runs jobs on a pod")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 on a pod)")
    p.add_argument("--port", type=int, default=0, help="port (0: any free port; the URL is printed)")
    tok = p.add_mutually_exclusive_group(required=True)
    tok.add_argument("--token-file", type=Path, help="file holding the bearer token (16+ characters)")
    tok.add_argument("--token-env", metavar="VAR", help="environment variable holding the bearer token")
    p.add_argument("--trainer", default="standin", help="inner trainer by name, or module:factory (default standin)")
    p.add_argument("--trainer-opt", action="append", default=[], metavar="K=V", help="trainer option (repeatable)")
    p.add_argument("--workdir", type=Path, default=None, help="where job bundles are unpacked (default: a temp dir)")
    p.add_argument("--url-file", type=Path, default=None, help="also write {url, pid} as JSON here once listening")
    p.add_argument("--idle-exit-s", type=float, default=0.0, help="exit after this long with no job or request")
    p.add_argument(
        "--self-check",
        choices=("auto", "none", "prime_rl"),
        default="auto",
        help="check the machine before taking jobs (auto: prime_rl for the prime_rl trainer, else none)",
    )
    p.set_defaults(func=run)


def _token(args: argparse.Namespace) -> str:
    from adapters.pod.tokens import read_token_file

    if args.token_file is not None:
        return read_token_file(args.token_file)
    token = os.environ.get(args.token_env, "").strip()
    if len(token) < 16:
        raise ValueError(f"${args.token_env}: the bearer token must be set and at least 16 characters")
    return token


def _self_check(args: argparse.Namespace, options: dict[str, str]) -> SelfCheckFn | None:
    mode = args.self_check
    if mode == "auto":
        mode = "prime_rl" if args.trainer == "prime_rl" else "none"
    if mode == "none":
        return None
    from adapters.prime_rl.selfcheck import prime_rl_self_check

    root = options.get("root") or os.environ.get("AIT_ROOT") or "/opt/ait"
    gpus = options.get("gpus", "")
    min_gpus = int(gpus) if gpus.isascii() and gpus.isdigit() and int(gpus) > 0 else 1
    expected = os.environ.get("AIT_VERSION", "")
    return lambda: prime_rl_self_check(root, min_gpus=min_gpus, expected_ait=expected)


def _with_trainer_failure(check: SelfCheckFn, reason: str) -> SelfCheckFn:
    from handlers.ports.pod_agent import SelfCheck, SelfCheckItem

    def checked() -> SelfCheck:
        result = check()
        items = [SelfCheckItem(name="trainer", ok=False, detail=reason[:240]), *result.items]
        return SelfCheck(state="failed", items=items, duration_s=result.duration_s)

    return checked


def run(args: argparse.Namespace) -> int:
    import asyncio

    from adapters.pod.core import AgentCore
    from adapters.pod.server import serve
    from adapters.pod.trainers import UnavailableTrainer, load_trainer, parse_options
    from adapters.prime_rl.procgroup import adopt_orphans

    try:
        token = _token(args)
        options = parse_options(args.trainer_opt)
        check = _self_check(args, options)
        try:
            trainer: InnerTrainer = load_trainer(args.trainer, options)
        except ValueError as exc:
            if check is None:
                raise
            # Serve anyway: the failed self-check names the reason, and the controller records it.
            trainer, check = UnavailableTrainer(args.trainer, str(exc)), _with_trainer_failure(check, str(exc))
    except ValueError as exc:
        sys.stderr.write(f"ait pod-agent: {exc}\n")
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ait-pod-agent-"))
    # Every child of this process belongs to the job it runs: no descendant may outlive the job's training
    # by leaving the process tree (setsid + a scrubbed environment): it is re-parented here and killed.
    adopted = adopt_orphans()
    core = AgentCore(trainer, workdir, self_check=check)

    def announce(url: str) -> None:
        reaper = "" if adopted else "; not a subreaper: a job's orphaned helpers could outlive it"
        sys.stdout.write(f"ait pod-agent: listening on {url} (trainer {trainer.name}, workdir {workdir}{reaper})\n")
        sys.stdout.flush()

    try:
        asyncio.run(
            serve(
                core,
                token,
                host=args.host,
                port=args.port,
                url_file=args.url_file,
                idle_exit_s=args.idle_exit_s,
                announce=announce,
            )
        )
    except OSError as exc:
        sys.stderr.write(f"ait pod-agent: cannot listen on {args.host}:{args.port}: {exc}\n")
        return 2
    return 0
