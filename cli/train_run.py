"""The body of ``ait train`` / ``ait resume``: one process of the outer loop on a run, from open to summary.

Inside one ``Runtime``: the reward and ledger reactors, the run header (``run.started`` or ``run.resumed``,
budget caps, frozen baselines, ``run.wiring``: what this process runs on), owed rewards, then the dispatcher (a
long-lived reactor running inner jobs on the pods of ``[fleet] provider``: local, Runpod or simulated, in this
process and this log) beside the :class:`~handlers.training.OuterLoop`, whose learner steps are metered as
``training`` costs. When the loop has applied its steps, in-flight
episodes are cancelled (a later ``ait resume`` with more steps continues them), the queued jobs are drained
and every pod terminated, ``run.finished`` is recorded and the summary printed.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import structlog
from rich.console import Console

from cli.crash_hook import KILL_ENV, kill_after
from cli.options import ProviderName, WorkerOptions
from cli.outer_episodes import OuterEpisodes
from cli.sandbox_opt import trainer_opts
from cli.train_config import RunConfig
from cli.train_summary import steps_done, summary_lines
from cli.train_wiring import make_backend, make_validator
from cli.worker_wiring import dispatcher_running
from engine.progress import progress
from engine.runtime import Runtime
from events import BaselineFrozen, RunFinished, RunWiring, SandboxOptedOut
from handlers.budget.costs_ledger import CostsLedger
from handlers.budget.prices import load_prices
from handlers.budget.rules import BudgetGate
from handlers.budget.training_cost import OFFLINE_ITEM
from handlers.durable_ports import DurableLearner
from handlers.episode.resume import episode_histories
from handlers.registry import default_projections
from handlers.reward.baseline_projection import BaselinesProjection, best_pre
from handlers.reward.baselines import merge_events
from handlers.reward.reactor import RewardReactor
from handlers.run.resume_view import ResumeState, ResumeView, catch_up_records
from handlers.run.resume_view import histories as resume_histories
from handlers.run.start import LedgerReactor, open_run
from handlers.training import OuterLoop, TrainingState, open_groups
from handlers.training.meter import GateMeter
from handlers.training.projection import TrainingProjection
from views.snapshot import snapshot_views

__all__ = ["TrainFailed", "train"]

log = structlog.get_logger("ait.train")


class TrainFailed(Exception):
    """The run cannot go on; the message says why and where."""


def _worker_options(cfg: RunConfig, unsafe: bool = False) -> WorkerOptions:
    provider: ProviderName = cfg.provider  # type: ignore[assignment]  # validated against PROVIDERS on load
    options = trainer_opts(cfg.inner.trainer_options, unsafe, cfg.inner.trainer)
    return WorkerOptions(
        provider=provider,
        trainer=cfg.inner.trainer,
        trainer_options=options,
        image=cfg.image,
        ait_source=cfg.ait_source,
    )


@contextlib.asynccontextmanager
async def fleet_running(
    rt: Runtime, cfg: RunConfig, ran_on: dict[str, str], unsafe: bool = False
) -> AsyncIterator[None]:
    """The run's dispatcher on the ``[fleet] provider``'s pods for the duration of the block (the worker's wiring,
    in this process: no ``ait worker`` beside it); then the queued jobs are drained (validated episodes of
    cancelled groups too) and every pod is terminated."""
    async with dispatcher_running(rt, _worker_options(cfg, unsafe), cfg.fleet) as serving:
        ran_on["jobs"] = serving.where
        yield
    assert serving.final is not None
    ran_on["final drain"] = serving.final.status


async def train(cfg: RunConfig, run_dir: Path, max_steps: int | None, opted_out: SandboxOptedOut | None = None) -> int:
    console = Console(highlight=False, soft_wrap=True)
    target = max_steps if max_steps is not None else cfg.outer.max_steps
    ledger = CostsLedger(cfg.budget.ledger)
    rewarder = RewardReactor(cfg.reward)
    validator, validator_desc = make_validator(cfg, unsafe=opted_out is not None)
    # The dashboard's and the report's views are snapshotted with the run: `ait watch` / `ait report` then
    # start from the newest snapshot and read only the log after it.
    resume_view = ResumeView()
    async with Runtime(run_dir, default_projections(), views=[*snapshot_views(), resume_view]) as rt:
        rt.start_reactor(rewarder)
        rt.start_reactor(LedgerReactor(ledger))
        if cfg.wandb is not None:
            from adapters.wandb_sink import WandbSink, wandb_reactor

            rt.start_reactor(wandb_reactor(WandbSink(cfg.wandb, rt.run_id, run_config=cfg.raw)))
        if os.environ.get(KILL_ENV):
            rt.start_reactor(kill_after(int(os.environ[KILL_ENV])))
        header = {"command": "train", "config_file": cfg.source, "config": cfg.raw, "steps": target}
        resumed = await open_run(
            rt, seed=cfg.run.seed, config=header, budget=cfg.budget, ledger=ledger, baselines=run_baselines(cfg)
        )
        await rt.emit(wiring(cfg, target))
        if opted_out is not None:
            await rt.emit(opted_out)
        missing_baselines(rt, cfg.outer.families)
        # What a resume needs from before the snapshot (the records the rewarder acts on, the reopened episodes'
        # events) is in the resume view (handlers/run/resume_view.py): the log is not read again.
        kept: ResumeState = rt.state(resume_view)
        owed = await rewarder.catch_up(rt, catch_up_records(kept)) if resumed else 0
        state: TrainingState = rt.state(TrainingProjection)
        reopened = open_groups(state)
        reopened_ids = [e for g in reopened for e in g.members]
        histories = resume_histories(kept, reopened_ids) if resumed else episode_histories([], reopened_ids)
        backend = make_backend(cfg, run_dir, resume_state_path=state.resume_state_path)
        ran_on = {**backend.ran_on, "validation": validator_desc}
        verb = "resumed" if resumed else "started"
        console.print(
            f"run {rt.run_id} {verb}: step {state.step} of {target}, sampler v{state.sampler_version}, "
            f"{len(reopened)} open group(s), {owed} owed reward(s) computed"
        )
        gate = BudgetGate.for_runtime(rt, load_prices())
        episodes = OuterEpisodes(
            rt, cfg, policy_for=backend.policy_for, validator=validator, gate=gate, histories=histories
        )
        # The learner's steps are paid calls that change the trainer's state: each waits until what the loop
        # emitted before it (its batch, the groups it trains on) is durable (commit before effect).
        learner = DurableLearner(backend.learner, rt.durable)
        loop = OuterLoop(
            config=cfg.outer,
            learner=learner,
            run_episode=episodes,
            emit=rt.emit,
            state=state,
            meter=training_meter(cfg, gate),
            drop_jobs=episodes.drop_jobs,
        )
        failure = ""
        try:
            async with fleet_running(rt, cfg, ran_on, unsafe=opted_out is not None):
                with progress("outer steps", total=target, unit="steps") as bar:
                    bar.update(completed=state.step)
                    async with anyio.create_task_group() as tg:

                        async def follow() -> None:
                            seen = -1
                            while True:
                                await rt.wait_until(functools.partial(_step_moved, rt, seen))
                                seen = rt.state(TrainingProjection).step
                                bar.update(completed=seen)

                        tg.start_soon(follow)
                        await loop.run(max_steps=target)
                        tg.cancel_scope.cancel()
        except Exception as exc:  # task groups raise ExceptionGroups: report the first real error
            failure = _first_error(exc)
        finally:
            await backend.aclose()
        if failure:
            await rt.emit(RunFinished(status="failed", reason=failure))
            raise TrainFailed(f"run {rt.run_id} failed: {failure} (log: {rt.log.path})")
        control = not cfg.backend.learn
        await rt.emit(RunFinished(status="ok", reason=f"{loop.step} steps {steps_done(control)}"))
        for line in summary_lines(rt, ran_on, control=control):
            console.print(line)
    return 0


def wiring(cfg: RunConfig, steps: int) -> RunWiring:
    """What this process of the run uses and the step it runs to, for the log (``ait report`` shows it at the top;
    ``ait watch`` shows ``step N of <steps>``)."""
    return RunWiring(
        inner_trainer=cfg.inner_trainer,
        learner_backend=cfg.backend.kind,
        provider=cfg.provider,
        agent=cfg.agent.kind,
        validator=cfg.episode.validator,
        standin=cfg.standin,
        steps=steps,
    )


def training_meter(cfg: RunConfig, gate: BudgetGate) -> GateMeter:
    """Learner steps priced for the model Tinker trains (the offline learner's steps cost nothing)."""
    from handlers.budget.prices import UnknownPrice

    item = cfg.outer.base_model if cfg.backend.kind == "tinker" else OFFLINE_ITEM
    try:
        return GateMeter(gate, item)
    except UnknownPrice as exc:
        raise TrainFailed(f"[outer] base_model: its training cannot be metered: {exc}") from None


# The baselines file whose scores a trainer's jobs are comparable with (``ait baselines --inner ...``).
BASELINES_OF_TRAINER = {"cpu": "cpu", "prime_rl": "gpu"}


def run_baselines(cfg: RunConfig) -> list[BaselineFrozen]:
    """best_pre scores for the run: the frozen file of the inner trainer (under this machine's eval key, each
    with the n it was measured on), with the config's ``[baselines.<family>]`` tables taking precedence."""
    from families import key_fingerprint
    from handlers.reward.baselines import BaselinesError, default_baselines_path, frozen_events, given_events

    from_file: list[BaselineFrozen] = []
    inner = BASELINES_OF_TRAINER.get(cfg.inner.trainer)
    if inner is not None:
        path = default_baselines_path(inner)
        if path.exists():
            try:
                from_file = frozen_events(path, key_fingerprint=key_fingerprint())
            except BaselinesError as exc:
                raise TrainFailed(f"{exc}; re-freeze with `ait baselines --inner {inner} --force`") from None
    return merge_events(from_file, given_events(cfg.baselines))


def missing_baselines(rt: Runtime, families: list[str]) -> None:
    """A succeeded job is rewarded against its family's frozen best_pre: without one its episode would wait
    for a reward forever. Refuse to start instead, saying how to get one."""
    frozen = rt.state(BaselinesProjection)
    missing = [f for f in families if best_pre(frozen, f) is None]
    if missing:
        raise TrainFailed(
            f"no frozen baseline for {', '.join(missing)}: freeze them with `ait baselines --inner cpu|gpu` (read "
            f"from its file for the cpu and prime_rl trainers), give them as [baselines.<family>] in the run "
            f"config, or drop those families"
        )


def _step_moved(rt: Runtime, seen: int) -> bool:
    step: int = rt.state(TrainingProjection).step
    return step != seen


def _first_error(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
