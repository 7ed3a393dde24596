"""``ait worker RUN --provider local|runpod|sim --max-pods N [--once]``: drain a run's job queue on a fleet.

For a queue no ``ait train`` owns (``ait episode`` runs, a stopped run's leftovers): ``ait train`` drives its
own fleet (``[fleet] provider``) in its own process. Opens the run's log (the single writer while it runs: the
run's writer lock refuses a worker on a run another process writes, engine/writer_lock.py), reconciles with
the provider (pods of this run that the log knows are adopted, any other pod with the run's prefix is
terminated), then dispatches until the queue is empty (``--once``) or until interrupted. A worker started on a
run that a crash interrupted is the resume path of the fleet: it retries exactly the launches, attempts and
terminations that have no outcome. Interrupting a worker leaves its pods running for the next worker to adopt;
``--once`` terminates every pod before it exits.

Exit status: 0 drained, 2 configuration or provider credentials, 3 budget refused a pod while work waited,
4 no pod can be launched (quota, invalid request).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.sandbox_opt import add_flag, trainer_opts

__all__ = ["register"]

_EXIT = {"drained": 0, "budget": 3, "blocked": 4, "stopped": 0}


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("worker", help="drain a run's job queue on a fleet of pods (local, runpod or sim)")
    p.add_argument("run", help="run id, run directory or events.jsonl")
    p.add_argument("--provider", choices=["local", "runpod", "sim"], default="local", help="where pods run")
    p.add_argument("--max-pods", type=int, default=16, help="most pods alive at once (default 16)")
    p.add_argument("--once", action="store_true", help="exit once the queue is empty (terminating every pod)")
    p.add_argument("--ladder", default=None, help="GPU types in order of preference, comma-separated")
    p.add_argument("--idle-ttl", type=float, default=None, metavar="S", help="terminate pods idle this long")
    p.add_argument("--max-attempts", type=int, default=None, help="attempts per job when its pods die")
    p.add_argument("--ready-timeout", type=float, default=None, metavar="S", help="bootstrap deadline per pod")
    p.add_argument("--tick", type=float, default=None, metavar="S", help=argparse.SUPPRESS)
    p.add_argument("--trainer", default="standin", help="local pods: inner trainer name (default standin)")
    p.add_argument("--trainer-opt", action="append", default=[], metavar="K=V", help="local pods: trainer option")
    p.add_argument(
        "--image", default="", help="runpod: container image (default: a CUDA base image; see docker/README.md)"
    )
    p.add_argument(
        "--ait-source",
        default="",
        metavar="REQ",
        help="runpod: pip requirement installing this project on a pod without it (default ai-trains-ai==VERSION)",
    )
    p.add_argument("--pin", action="append", default=[], metavar="K=V", help="a revision every pod is pinned to")
    add_flag(p)  # local pods: lets the CPU trainer run without bubblewrap (it refuses each job otherwise)
    p.set_defaults(func=run)


def _config(args: argparse.Namespace, default_ladder: tuple[str, ...]) -> Any:
    from adapters.pod.trainers import parse_options
    from handlers.fleet.policy import FleetConfig

    values: dict[str, Any] = {"max_pods": args.max_pods, "ladder": default_ladder}
    if args.ladder:
        values["ladder"] = tuple(s.strip() for s in args.ladder.split(",") if s.strip())
    for flag, key in (
        ("idle_ttl", "idle_ttl_s"),
        ("max_attempts", "max_attempts"),
        ("ready_timeout", "ready_timeout_s"),
        ("tick", "tick_s"),
    ):
        if getattr(args, flag) is not None:
            values[key] = getattr(args, flag)
    values["pins"] = parse_options(args.pin)
    return FleetConfig.from_mapping(values, source="ait worker flags")


def run(args: argparse.Namespace) -> int:
    import anyio

    from engine.rundir import resolve_run

    try:
        run_dir = resolve_run(args.run, args.runs_root)
    except FileNotFoundError as exc:
        sys.stderr.write(f"ait worker: {exc}\n")
        return 2
    from adapters.pod.trainers import parse_options
    from cli.options import WorkerOptions
    from cli.worker_wiring import WorkerSetupError, default_ladder, run_worker

    try:
        opts = WorkerOptions(
            provider=args.provider,
            trainer=args.trainer,
            trainer_options=trainer_opts(parse_options(args.trainer_opt), args.unsafe_no_sandbox, args.trainer),
            image=args.image,
            ait_source=args.ait_source,
            once=args.once,
        )
        config = _config(args, default_ladder(opts.provider))
    except ValueError as exc:
        sys.stderr.write(f"ait worker: {exc}\n")
        return 2
    if opts.provider == "runpod" and opts.trainer == "standin":
        # The stand-in's scores are a hash of the bundle: never pay for GPUs to compute them.
        sys.stderr.write(
            "ait worker: --provider runpod with --trainer standin would pay for GPUs to make up scores: "
            "name a real trainer (--trainer prime_rl)\n"
        )
        return 2
    try:
        summary = anyio.run(run_worker, opts, run_dir, config)
    except WorkerSetupError as exc:
        sys.stderr.write(f"ait worker: {exc}\n")
        return 2
    code: int = _EXIT.get(summary.status, 1)
    return code
