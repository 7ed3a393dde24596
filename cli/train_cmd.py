"""``ait train --config FILE`` and ``ait resume RUN``: the outer loop, on one run's log.

``train`` opens a new run (``run.started`` records the whole config), ``resume`` reopens one and carries on
from its log: the training projection gives the next step, the newest sampler, the task queue, the next free
ids and the open groups; the learner is restored from the last ``lora.step_applied`` ``state_path`` (weights
and optimizer state); open groups are re-launched with their recorded ids and sampler version, and each of
their episodes continues from its last recorded turn (cli/outer_episodes.py); owed rewards are
computed; the dispatcher reconciles pods and job attempts from the log (adopt, retry pending requests by key)
instead of relaunching them. Both run the same loop until ``[outer] max_steps`` (or ``--max-steps``) steps
are applied, then let queued inner jobs finish, terminate the pods and print a summary.

Exit status: 0 done, 2 a config or run that cannot be used (the message names the file and key), 1 the run
failed (the message says where).

``AIT_KILL_AFTER_SEQ=N`` (tests only) makes the process SIGKILL itself once event ``N`` is durable: the
crash-resume test's way to die at an exact event boundary.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from cli.sandbox_opt import add_flag

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("train", help="train the trainer agent with the outer RL loop (a run config TOML)")
    p.add_argument("--config", required=True, help="run config, e.g. examples/configs/smoke.toml")
    p.add_argument("--run-id", default=None, help="run id (default: <[run] name>-<time>-<hex>)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many learner steps in all")
    add_flag(p)
    p.set_defaults(func=run_train)
    r = sub.add_parser("resume", help="carry on an interrupted `ait train` run from its log")
    r.add_argument("run", help="run id, run directory or events.jsonl")
    r.add_argument("--max-steps", type=int, default=None, help="stop after this many learner steps in all")
    add_flag(r)
    r.set_defaults(func=run_resume)


def _fail(what: str, message: str) -> int:
    sys.stderr.write(f"ait {what}: {message}\n")
    return 2


def run_train(args: argparse.Namespace) -> int:
    from cli.train_config import load_run_config
    from handlers.training import ConfigError

    runs_root = Path(args.runs_root)
    try:
        cfg = load_run_config(args.config, runs_root=runs_root)
    except ConfigError as exc:
        return _fail("train", str(exc))
    run_id = args.run_id or f"{cfg.run.name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"
    run_dir = runs_root / run_id
    if (run_dir / "events.jsonl").exists():
        return _fail("train", f"run {run_id} exists at {run_dir}: use `ait resume {run_id}`")
    return _keys_then_go("train", cfg, run_dir, args.max_steps, args.unsafe_no_sandbox)


def run_resume(args: argparse.Namespace) -> int:
    from cli.train_config import parse_run_config
    from engine.pick import first_record
    from engine.rundir import resolve_run
    from events import RunStarted
    from handlers.training import ConfigError

    try:
        run_dir = resolve_run(args.run, args.runs_root)
    except FileNotFoundError as exc:
        return _fail("resume", str(exc))
    first = first_record(run_dir.events)  # the header only: the runtime reads the rest (snapshot + tail)
    header = first.event if first is not None else None
    if not isinstance(header, RunStarted) or header.config.get("command") != "train":
        return _fail("resume", f"{run_dir.events}: not an `ait train` run (its first event is not its run.started)")
    source = f"{run_dir.events} (run.started config, from {header.config.get('config_file', '?')})"
    try:
        cfg = parse_run_config(dict(header.config.get("config", {})), source=source, runs_root=Path(args.runs_root))
    except ConfigError as exc:
        return _fail("resume", str(exc))
    return _keys_then_go("resume", cfg, run_dir.root, args.max_steps, args.unsafe_no_sandbox)


def _keys_then_go(what: str, cfg: Any, run_dir: Path, max_steps: int | None, unsafe: bool) -> int:
    """Fail fast, before anything is written, when a key the config needs is not in the environment."""
    from cli.train_config import required_keys

    missing = {k: why for k, why in required_keys(cfg).items() if not os.environ.get(k, "").strip()}
    if missing:
        needs = "; ".join(f"{k} (for {why})" for k, why in missing.items())
        return _fail(
            what,
            f"{cfg.source}: missing key(s) {needs}: export them (keys are never logged), or run "
            f"examples/configs/smoke.toml, which needs none",
        )
    return _go(what, cfg, run_dir, max_steps, unsafe)


def _go(what: str, cfg: Any, run_dir: Path, max_steps: int | None, unsafe: bool = False) -> int:
    import anyio

    from adapters.sandbox import WeakIsolation
    from cli.sandbox_opt import check
    from cli.train_run import TrainFailed, train
    from engine.logs import configure_logging

    try:
        # Agent code runs in the probe, and on local pods in the CPU trainer's child: both need bubblewrap.
        runs_agent_code = cfg.episode.validator != "job_config" or cfg.inner.trainer == "cpu"
        opted_out = check(what, unsafe) if runs_agent_code or unsafe else None
    except WeakIsolation as exc:
        return _fail(what, str(exc))
    configure_logging(run_dir=run_dir, level="info", console=sys.stderr, console_level="warning", run_id=run_dir.name)
    try:
        return anyio.run(train, cfg, run_dir, max_steps, opted_out)
    except TrainFailed as exc:
        sys.stderr.write(f"ait {what}: {exc}\n")
        return 1
    except BaseExceptionGroup as group:  # raised inside the runtime: its task group wraps it
        failed, _rest = group.split(TrainFailed)
        if failed is None:
            raise
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        sys.stderr.write(f"ait {what}: {first}\n")
        return 1
