"""``ait episode --task SPEC [--agent scripted|openai:MODEL]``: one episode, end to end, on one run.

The composition: a run directory with the domain projections, the run header (config, budget, frozen
baselines), the episode loop (agent policy + sandboxed validation probe), then, for a validated job, the
job runner (the local provider's pod agent with the embedded CPU trainer unless told otherwise), and the
reward. Prints the reward breakdown, token usage and dollar cost, and says what it ran on.

A multi-job task spec (``episode.max_jobs > 1``) runs the job runner *during* the episode: each job the agent
submits is drained while it keeps working (waits, reads results, revises), and the command ends once the episode
has finished and every job has an outcome, printing each job's hidden pre/post next to its dev scores and the
reward computed from the final one.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.sandbox_opt import add_flag

if TYPE_CHECKING:  # the heavy stacks load when an episode runs, not when `ait --help` lists the commands
    from rich.console import Console

    from cli.episode_wiring import EpisodeDeps
    from cli.options import EpisodeOptions
    from events import SandboxOptedOut

__all__ = ["register", "run_episode"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("episode", help="run one trainer-agent episode end to end")
    p.add_argument("--task", required=True, help="task spec JSON, e.g. examples/tasks/calc_chain_v1_fast.json")
    p.add_argument("--agent", default="scripted", help="scripted | scripted:PATH | openai:MODEL (default: scripted)")
    p.add_argument("--run-id", default=None, help="run id (default: a new one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--max-turns", type=int, default=40)
    p.add_argument("--episode-budget-usd", type=float, default=2.0)
    p.add_argument("--run-budget-usd", type=float, default=100.0)
    p.add_argument("--no-job", action="store_true", help="stop after validation (do not train)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --agent openai:MODEL")
    p.add_argument("--trainer", default="cpu", help="inner trainer on the local pod: cpu (default) or standin")
    p.add_argument("--trainer-opt", action="append", default=[], metavar="K=V", help="inner trainer option")
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log lines on the console")
    add_flag(p)
    p.set_defaults(func=run)


def _new_run_id() -> str:
    return f"ep-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def options(args: argparse.Namespace) -> EpisodeOptions:
    """The typed options of one ``ait episode`` (a bad ``--trainer-opt`` raises ValueError naming it)."""
    from adapters.pod.trainers import parse_options
    from cli.options import EpisodeOptions

    return EpisodeOptions(
        task=args.task,
        runs_root=str(args.runs_root),
        agent=args.agent,
        base_url=args.base_url,
        run_id=args.run_id,
        seed=args.seed,
        max_attempts=args.max_attempts,
        max_turns=args.max_turns,
        episode_budget_usd=args.episode_budget_usd,
        run_budget_usd=args.run_budget_usd,
        no_job=args.no_job,
        trainer=args.trainer,
        trainer_options=parse_options(args.trainer_opt),
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )


def run(args: argparse.Namespace) -> int:
    import anyio
    from rich.console import Console

    from cli.episode_wiring import default_deps
    from cli.library_noise import quiet_libraries
    from engine.logs import configure_logging

    verbose = bool(getattr(args, "verbose", False))
    quiet_libraries(verbose)
    console = Console(highlight=False, soft_wrap=True)
    level = "info" if verbose else "warning"  # -v: the log lines on the console too
    configure_logging(level="info", console=sys.stderr, console_level=level)
    from adapters.sandbox import WeakIsolation
    from cli.sandbox_opt import check

    try:
        opts = options(args)
        opted_out = check("episode", opts.unsafe_no_sandbox)
        deps = default_deps(opts, console)
    except (ValueError, OSError, RuntimeError, WeakIsolation) as exc:
        console.print(f"[red]ait episode:[/red] {exc}")
        return 2
    run_dir = Path(args.runs_root) / (args.run_id or _new_run_id())
    # Structured logs go to the run's logs.jsonl; the console keeps only warnings (the command prints its own
    # progress lines) unless -v asked for the log lines too.
    configure_logging(run_dir=run_dir, level="info", console=sys.stderr, console_level=level, run_id=run_dir.name)
    return anyio.run(run_episode, opts, deps, run_dir, console, opted_out)


async def run_episode(
    args: EpisodeOptions, deps: EpisodeDeps, run_dir: Path, console: Console, opted_out: SandboxOptedOut | None = None
) -> int:
    import anyio

    from engine.blobs import BlobStore
    from engine.runtime import Runtime
    from events import RunWiring
    from families.spec import load_spec
    from handlers.budget.costs_ledger import CostsLedger
    from handlers.budget.prices import load_prices
    from handlers.budget.rules import BudgetConfig, BudgetGate
    from handlers.episode.projection import EpisodesProjection
    from handlers.episode.runner import EpisodeRunner, EpisodeSetup
    from handlers.episode.setup import opening_messages, template_files
    from handlers.registry import default_projections
    from handlers.reward.baselines import scores_of
    from handlers.reward.formula import RewardConfig
    from handlers.reward.projection import RewardsProjection
    from handlers.reward.reactor import RewardReactor
    from handlers.run.start import LedgerReactor, open_run

    spec_path = Path(args.task)
    spec = load_spec(spec_path)
    budget = BudgetConfig(
        episode_usd=args.episode_budget_usd,
        run_usd=args.run_budget_usd,
        ledger=str(Path(args.runs_root) / "costs.jsonl"),
    )
    ledger = CostsLedger(budget.ledger)
    config = {
        "command": "episode",
        "task": str(spec_path),
        "agent": deps.policy.name,
        "max_attempts": args.max_attempts,
        "ran_on": deps.ran_on,
    }
    from events import RunFinished
    from views.progress_lines import ProgressLines

    rewarder = RewardReactor(RewardConfig())
    async with Runtime(run_dir, default_projections()) as rt:
        rt.start_reactor(rewarder)
        rt.start_reactor(LedgerReactor(ledger))
        progress = ProgressLines(console)
        rt.start_reactor(progress)
        await open_run(rt, seed=args.seed, config=config, budget=budget, ledger=ledger, baselines=deps.baselines)
        # What this run runs on (ait report shows it): one episode has no learner; its job runs on a local pod.
        await rt.emit(
            RunWiring(
                inner_trainer=args.trainer,
                learner_backend="none",
                provider="local",
                agent=deps.policy.name,
                validator="probe",
                standin=args.trainer == "standin",
            )
        )
        if opted_out is not None:
            await rt.emit(opted_out)
        gate = BudgetGate.for_runtime(rt, load_prices())
        blobs = BlobStore(run_dir / "blobs")
        episode_id = "ep-0"
        files = template_files(spec, max_attempts=args.max_attempts)
        setup = EpisodeSetup(
            episode_id=episode_id,
            task_id=f"{spec.name}/0",
            spec=spec,
            spec_json=await anyio.Path(spec_path).read_bytes(),
            workspace=run_dir / "episodes" / episode_id / "workspace",
            initial_files=files,
            messages=opening_messages(spec, files),
            baselines=scores_of(deps.baselines).get(spec.family, {}),
            max_turns=args.max_turns,
            max_attempts=args.max_attempts,
        )
        console.print(f"run {rt.run_id}: episode on {spec.name} with agent {deps.policy.name}")
        if setup.multi:
            from cli.episode_multi import run_multi_job_episode

            runner = EpisodeRunner(rt, blobs, deps.policy, deps.validator, gate)
            return await run_multi_job_episode(
                rt,
                runner,
                setup,
                deps,
                ledger,
                console,
                no_job=args.no_job,
                write_artifacts=_write_artifacts,
                progress=progress,
            )
        outcome = await EpisodeRunner(rt, blobs, deps.policy, deps.validator, gate).run(setup)
        await progress.caught_up(rt.next_seq - 1)  # the probe's verdict line before the episode's summary
        console.print(f"episode {outcome.status} after {outcome.turns} turns, {outcome.attempts} submission(s)")
        failure = ""
        if outcome.status == "error":
            # The agent could not be reached or answered nonsense: say why here, not only in the log.
            failure = rt.state(EpisodesProjection)[episode_id].reason or "the agent failed"
            console.print(f"[red]episode failed: {failure}[/red]")
        _write_artifacts(run_dir / "episodes" / episode_id, outcome, spec.name, deps.ran_on)
        if outcome.status == "validated" and outcome.job is not None:
            from events import JobQueued

            job_id = "job-0"
            await rt.emit(
                JobQueued(
                    job_id=job_id,
                    episode_id=episode_id,
                    family=spec.family,
                    base_model=outcome.job.prime_rl.model,
                    bundle=outcome.bundle,
                    time_budget_s=float(spec.bounds.time_budget_s),
                )
            )
            if deps.job_runner is None or args.no_job:
                console.print(f"job {job_id} queued; stopping after validation ({deps.ran_on.get('jobs', '')})")
                console.print(_usage_line(rt, ledger, episode_id))
                console.print("ran on: " + ", ".join(f"{k}={v}" for k, v in deps.ran_on.items()))
                console.print(f"log: {rt.log.path}")
                await rt.emit(RunFinished(status="ok", reason="validated; job queued, not run"))
                return 0
            try:
                await deps.job_runner(rt, job_id)
            except RuntimeError as exc:
                console.print(f"[red]{exc}[/red]")
                failure = str(exc)
        with anyio.move_on_after(30):
            await rt.wait_until(lambda: episode_id in rt.state(RewardsProjection) or episode_id in rewarder.refused)
        if episode_id not in rt.state(RewardsProjection):
            why = rewarder.refused.get(episode_id) or failure or "see the log"
            console.print(f"[red]no reward was computed: {why}[/red]")
            await rt.emit(RunFinished(status="failed", reason=f"no reward: {why}"[:500]))
            return 1
        reward = rt.state(RewardsProjection)[episode_id]
        console.print(_result_line(rt, reward))
        ep = rt.state(EpisodesProjection)[episode_id]
        spent = sum(r.usd for r in ledger.read() if r.run_id == rt.run_id)
        console.print(
            f"tokens: {ep.input_tokens} in ({ep.cached_input_tokens} cached), {ep.output_tokens} out; cost ${spent:.4f}"
        )
        console.print("ran on: " + ", ".join(f"{k}={v}" for k, v in deps.ran_on.items()))
        console.print(f"log: {rt.log.path}  (report: ait report {rt.run_id})")
        if failure:
            await rt.emit(RunFinished(status="failed", reason=failure[:500]))
            return 1
        await rt.emit(RunFinished(status="ok", reason=f"episode {outcome.status}; reward {reward.reward:+.4f}"))
    return 0


def _result_line(rt: Any, reward: Any) -> str:
    """The reward line, with the number of hidden tasks behind post and best_pre and any early stop."""
    from events import JobStoppedEarly, JobSucceeded
    from handlers.reward.formula import explain

    line = explain(reward)
    if not reward.job_id:
        return line
    succeeded = stopped = None
    for rec in read_records(rt):
        ev = rec.event
        if isinstance(ev, JobSucceeded) and ev.job_id == reward.job_id:
            succeeded = ev
        elif isinstance(ev, JobStoppedEarly) and ev.job_id == reward.job_id:
            stopped = ev
    if succeeded is not None and succeeded.metrics.get("eval_n"):
        line += f"; n={int(succeeded.metrics['eval_n'])} hidden tasks"
    if stopped is not None:
        line += f"\n[yellow]the job was cut short: {stopped.line()}[/yellow]"
    return line


def read_records(rt: Any) -> list[Any]:
    from engine.log import read_log

    return list(read_log(rt.log.path).records)


def _usage_line(rt: Any, ledger: Any, episode_id: str) -> str:
    from handlers.episode.projection import EpisodesProjection

    ep = rt.state(EpisodesProjection)[episode_id]
    spent = sum(r.usd for r in ledger.read() if r.run_id == rt.run_id)
    return (
        f"tokens: {ep.input_tokens} in ({ep.cached_input_tokens} cached), {ep.output_tokens} out; "
        f"cost ${spent:.4f} (this run, from the cost ledger)"
    )


def _write_artifacts(directory: Path, outcome: Any, spec_name: str, ran_on: dict[str, str]) -> None:
    """The episode's trajectory (every message the agent saw and sent) and manifest, beside its workspace.

    Both are conveniences derived from the run: the log and its blobs remain the truth."""
    import json

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "trajectory.json").write_text(json.dumps(outcome.messages, indent=1) + "\n", encoding="utf-8")
    manifest = {
        "episode_id": outcome.episode_id,
        "task_spec": spec_name,
        "status": outcome.status,
        "turns": outcome.turns,
        "attempts": outcome.attempts,
        "parseable": outcome.parseable,
        "bundle": outcome.bundle,
        "usage": outcome.usage,
        "ran_on": ran_on,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
