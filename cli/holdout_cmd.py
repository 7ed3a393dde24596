"""``ait holdout --checkpoint PATH --family triage -n 10``: the held-out family, with the sampler at a checkpoint.

Runs ``n`` episodes of ``--family`` (default ``triage``, never trained on) with the agent bound to the sampler
version that ``PATH`` was published as (``base`` for version 0, the untrained model), in the run that
published it (``--run``, or the run under ``--runs-root`` whose log has that ``sampler.published``), on the
run's own config (backend, validator, inner trainer). The episodes are a holdout arm (group ``holdout-v<N>``):
in no outer group and never trained on; each validated job runs on the run's pods like any other.

Prints the seed's holdout table (checkpoint, outer steps, mean reward, validated, inner jobs succeeded, worst
episode; the same rows as ``ait report``'s Holdout section) and writes it to ``<run>/holdout/v<N>.md`` and
``.json``. Exit status: 0 done, 2 bad arguments (an unknown checkpoint, a family without a trajectory, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("holdout", help="run n held-out episodes with the sampler at a checkpoint; the holdout table")
    p.add_argument("--checkpoint", required=True, help="a published sampler path, or 'base' (version 0)")
    p.add_argument("--family", default="triage", help="held-out family (default triage)")
    p.add_argument("-n", type=int, default=10, help="episodes (default 10)")
    p.add_argument("--run", default=None, help="the run (default: the one whose log published --checkpoint)")
    p.add_argument("--trajectory", default=None, help="scripted agent: the trajectory JSON for every episode")
    p.add_argument(
        "--continue",
        dest="continue_arm",
        action="store_true",
        help="complete this arm (checkpoint and family) to n episodes: carry its unfinished ones (an interrupted "
        "arm) on where they stopped, then start new ones for the rest",
    )
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    sys.stderr.write(f"ait holdout: {message}\n")
    return 2


def _find_run(runs_root: Path, checkpoint: str) -> Path | None:
    """The newest run whose log published ``checkpoint``. Only a log holding the path's bytes is decoded (a long
    run's log takes seconds to read and check), and one that cannot be read is passed over: another run's damage
    is not this command's business (``ait replay`` on that run says what is wrong with it)."""
    import msgspec

    from engine.log import LogCorrupted, read_log
    from events import SamplerPublished

    needle = msgspec.json.encode(checkpoint)  # the path as the log writes it, a JSON string
    for events in sorted(runs_root.glob("*/events.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            if needle not in events.read_bytes():
                continue
            records = read_log(events).records
        except (OSError, LogCorrupted):
            continue
        for rec in records:
            if isinstance(rec.event, SamplerPublished) and rec.event.path == checkpoint:
                return events.parent
    return None


def run(args: argparse.Namespace) -> int:
    import anyio

    from cli.holdout_arm import read_arm
    from cli.train_config import parse_run_config
    from cli.train_run import TrainFailed
    from engine.log import read_log
    from engine.logs import configure_logging
    from engine.rundir import resolve_run
    from events import RunStarted, SamplerPublished
    from families import HELD_OUT_FAMILIES
    from handlers.training import ConfigError

    if args.n < 1:
        return _fail(f"-n {args.n}: need at least one episode")
    if args.family not in HELD_OUT_FAMILIES:
        return _fail(f"--family {args.family!r} is trained on; the held-out families are {sorted(HELD_OUT_FAMILIES)}")
    runs_root = Path(args.runs_root)
    if args.run:
        try:
            run_dir = resolve_run(args.run, runs_root).root
        except FileNotFoundError as exc:
            return _fail(str(exc))
    else:
        if args.checkpoint == "base":  # every run starts from the base model: which run's config is not implied
            return _fail("--checkpoint base: the untrained model belongs to no one run; pass --run RUN")
        found = _find_run(runs_root, args.checkpoint)
        if found is None:
            return _fail(f"--checkpoint {args.checkpoint!r}: no run under {runs_root}/ published it; pass --run RUN")
        run_dir = found
    records = read_log(run_dir / "events.jsonl").records
    header = records[0].event
    published = {r.event.path: r.event.sampler_version for r in records if isinstance(r.event, SamplerPublished)}
    if args.checkpoint != "base" and args.checkpoint not in published:
        return _fail(f"--checkpoint {args.checkpoint!r}: run {run_dir.name} never published it")
    version = 0 if args.checkpoint == "base" else published[args.checkpoint]
    arm = read_arm(records, f"holdout-v{version}", args.family)
    del records
    path = "" if args.checkpoint == "base" else args.checkpoint
    if not isinstance(header, RunStarted) or header.config.get("command") != "train":
        return _fail(f"{run_dir}/events.jsonl: not an `ait train` run")
    try:
        cfg = parse_run_config(
            dict(header.config["config"]), source=f"{run_dir}/events.jsonl run.started config", runs_root=runs_root
        )
    except ConfigError as exc:
        return _fail(str(exc))
    trajectory = Path(args.trajectory) if args.trajectory else None
    if cfg.agent.kind == "scripted" and trajectory is None and not cfg.trajectory_path(args.family).is_file():
        return _fail(f"no scripted trajectory {cfg.trajectory_path(args.family)}: pass --trajectory PATH")
    if not cfg.spec_path(args.family).is_file():
        return _fail(f"no task spec {cfg.spec_path(args.family)} for {args.family}")
    configure_logging(run_dir=run_dir, level="info", console=sys.stderr, console_level="warning", run_id=run_dir.name)
    try:
        return anyio.run(holdout, cfg, run_dir, version, path, arm, args.n, trajectory, args.continue_arm)
    except TrainFailed as exc:
        return _fail(str(exc))


async def holdout(
    cfg: Any, run_dir: Path, version: int, path: str, arm: Any, n: int, trajectory: Path | None, carry_on: bool
) -> int:
    """Run the arm's episodes: ``n`` new ones, or (``carry_on``) its unfinished ones and as many new ones as bring
    it to ``n`` (``arm``: a :class:`cli.holdout_arm.ArmState`)."""
    import anyio
    from rich.console import Console

    from cli.crash_hook import KILL_ENV, kill_after
    from cli.outer_episodes import OuterEpisodes
    from cli.train_run import fleet_running, missing_baselines
    from cli.train_wiring import make_backend, make_validator
    from engine.progress import progress
    from engine.runtime import Runtime
    from events import RunFinished
    from handlers.budget.costs_ledger import CostsLedger
    from handlers.budget.prices import load_prices
    from handlers.budget.rules import BudgetGate
    from handlers.registry import default_projections
    from handlers.reward.baselines import given_events
    from handlers.reward.reactor import RewardReactor
    from handlers.run.start import LedgerReactor, open_run
    from handlers.run.summary import RunSummaryProjection
    from handlers.training import TaskRef
    from views.report.data import collect

    console = Console(highlight=False, soft_wrap=True)
    ledger = CostsLedger(cfg.budget.ledger)
    validator, validator_desc = make_validator(cfg)
    async with Runtime(run_dir, default_projections()) as rt:
        # A holdout arm reopens a run (run.resumed) to add episodes to it; a run that had finished is marked
        # finished again after the arm, so its report and `ait watch` do not show a finished run as running.
        before = rt.state(RunSummaryProjection).status
        rewarder = RewardReactor(cfg.reward)
        rt.start_reactor(rewarder)
        if os.environ.get(KILL_ENV):  # tests: a kill -9 in the middle of an arm (cli/crash_hook.py)
            rt.start_reactor(kill_after(int(os.environ[KILL_ENV])))
        rt.start_reactor(LedgerReactor(ledger))
        await open_run(
            rt, seed=cfg.run.seed, config={}, budget=cfg.budget, ledger=ledger, baselines=given_events(cfg.baselines)
        )
        family = arm.family
        missing_baselines(rt, [family])
        backend = make_backend(cfg, run_dir, trajectory=trajectory)
        ran_on = {**backend.ran_on, "validation": validator_desc}
        episodes = OuterEpisodes(
            rt,
            cfg,
            policy_for=backend.policy_for,
            validator=validator,
            gate=BudgetGate.for_runtime(rt, load_prices()),
            histories=dict(arm.histories) if carry_on else None,
            group_prefix=arm.group,
        )
        from handlers.episode.projection import EpisodesProjection

        carried: list[tuple[str, TaskRef]] = []
        if carry_on:
            await rewarder.catch_up(rt, arm.owed)  # an outcome recorded before the interruption, its reward not
            carried = [(eid, TaskRef.parse(task_id)) for eid, task_id in arm.unfinished]
        fresh = max(0, n - len(arm.rewarded) - len(carried)) if carry_on else n
        already = sum(1 for e in rt.state(EpisodesProjection).values() if e.group_id.startswith("holdout"))
        rng = random.Random(f"{cfg.run.seed}:holdout:{already}")
        new = [(f"ho{already + i:05d}", TaskRef(family=family, index=rng.randrange(10_000))) for i in range(fresh)]
        tasks = carried + new
        # The arm's episodes this table's "worst episode of this arm" is taken over.
        ids = [*arm.rewarded, *(eid for eid, _ in tasks)] if carry_on else [eid for eid, _ in new]
        where = f"on {family} with sampler v{version} ({path or 'base'})"
        if carry_on:
            console.print(
                f"run {rt.run_id}: holdout arm {arm.group} {where}: {len(arm.rewarded)} episode(s) done, "
                f"{len(carried)} carried on, {fresh} new (to {n})"
            )
        else:
            console.print(f"run {rt.run_id}: {n} holdout episodes {where}")
            if arm.unfinished:
                console.print(
                    f"note: this arm has {len(arm.unfinished)} unfinished episode(s) from an earlier, interrupted "
                    f"holdout ({', '.join(e for e, _ in arm.unfinished[:5])}); `--continue` completes the arm to -n "
                    "instead of starting n new ones"
                )
        limit = anyio.Semaphore(cfg.outer.episode_concurrency)
        try:
            async with fleet_running(rt, cfg, ran_on):
                with progress("holdout episodes", total=len(tasks), unit="episodes") as bar:

                    async def one(eid: str, task: TaskRef) -> None:
                        async with limit:
                            await episodes.run_to_reward(eid, task, version, path)
                        bar.advance()

                    async with anyio.create_task_group() as tg:
                        for eid, task in tasks:
                            tg.start_soon(one, eid, task)
        finally:
            await backend.aclose()
        if before.startswith("finished:"):
            status = before.removeprefix("finished:")
            reason = f"holdout arm: {len(tasks)} {family} episodes on sampler v{version}"
            await rt.emit(RunFinished(status=status, reason=reason))
    data = collect(run_dir)
    rows = [r for r in data.holdout if r.sampler_version == version]
    table = _table(rows)
    out = run_dir / "holdout"
    out.mkdir(exist_ok=True)
    (out / f"v{version}.md").write_text(table + "\n", encoding="utf-8")
    worst = min(ids, key=lambda e: rt.states["rewards"][e].reward)
    doc = {"checkpoint": path or "base", "sampler_version": version, "family": family, "episodes": ids}
    doc["rows"] = [json.loads(_encode(r)) for r in rows]
    doc["worst_episode"] = worst
    (out / f"v{version}.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    console.print(table)
    console.print(f"worst episode of this arm: {worst}; every row counts all holdout episodes of sampler v{version}")
    console.print("ran on: " + ", ".join(f"{k}={v}" for k, v in ran_on.items() if k != "final drain"))
    console.print(f"written: {out / f'v{version}.md'}")
    return 0


def _encode(row: Any) -> str:
    import msgspec

    return msgspec.json.encode(row).decode()


def _table(rows: list[Any]) -> str:
    head = ["checkpoint", "outer steps", "mean reward", "validated", "inner jobs succeeded", "worst episode"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for h in rows:
        name = "base model" if h.outer_steps == 0 else f"`{h.checkpoint}`"
        steps = "-" if h.outer_steps is None else str(h.outer_steps)
        lines.append(
            f"| {name} | {steps} | {h.reward:+.3f} | {h.validated}/{h.episodes} | "
            f"{h.jobs_succeeded}/{h.jobs} | {h.worst:+.3f} |"
        )
    return "\n".join(lines)
