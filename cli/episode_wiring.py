"""Choosing the concrete adapters for ``ait episode``: the agent policy, the probe, the job runner, baselines.

With no API keys and no flags: the scripted agent (``fixtures/trajectories/<family>_good.json``), the
sandboxed probe, local subprocess pods running the embedded CPU trainer, and the CPU baselines file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.options import EpisodeOptions, WorkerOptions
from events import BaselineFrozen

__all__ = ["REPO", "EpisodeDeps", "JobRunner", "JobServer", "JobsNotDrained", "default_deps", "make_policy"]

# A job runner drains the run's queue until the given job has an outcome event in the log.
JobRunner = Callable[[Any, str], Awaitable[None]]
# A job server runs the run's jobs as they are queued for the duration of its block, then drains the queue.
JobServer = Callable[[Any], AbstractAsyncContextManager[None]]


class JobsNotDrained(RuntimeError):
    """The job server's final drain ended without every queued job run (its status and message say why)."""


@dataclass
class EpisodeDeps:
    """The concrete adapters, chosen by the CLI (tests inject fakes)."""

    policy: Any  # handlers.ports.policy.AgentPolicy
    validator: Any  # handlers.ports.validator.Validator
    job_runner: JobRunner | None  # None: stop after validation
    baselines: list[BaselineFrozen]  # what the run's rewards compare with, as frozen (with n and key)
    ran_on: dict[str, str]  # what each part ran on, printed at the end
    # A multi-job episode's jobs: one dispatcher (and pod) for the whole episode; None: a drain per open job
    # through job_runner (tests' fakes)
    job_server: JobServer | None = None


REPO = Path(__file__).resolve().parents[1]
TRAJECTORIES = REPO / "fixtures" / "trajectories"
# The baselines a trainer's scores compare with: the CPU trainer is scored like `ait baselines --inner cpu`;
# the stand-in trainer's scores are made up, so no baseline applies.
INNER_OF = {"cpu": "cpu"}


def make_policy(agent: str, family: str, base_url: str | None, *, multi: bool = False) -> tuple[Any, str]:
    """The policy for ``--agent`` and a description of it (``multi``: the spec allows several jobs, and the
    default scripted agent is the family's two-job trajectory where there is one)."""
    from adapters.agents import ScriptedPolicy, load_trajectory

    kind, _, arg = agent.partition(":")
    if kind == "scripted":
        two_jobs = TRAJECTORIES / f"{family}_two_jobs.json"
        default = two_jobs if multi and two_jobs.exists() else TRAJECTORIES / f"{family}_good.json"
        path = Path(arg) if arg else default
        if not path.exists():
            raise ValueError(f"no scripted trajectory at {path}; pass --agent scripted:PATH or openai:MODEL")
        return ScriptedPolicy(load_trajectory(path)), f"scripted ({path.name})"
    if kind == "openai":
        from adapters.agents.openai import OpenAIConfig, OpenAIPolicy

        if not arg:
            raise ValueError("--agent openai:MODEL needs a model name, e.g. openai:gpt-4.1-mini")
        default_url = OpenAIConfig(model=arg).base_url  # (the class attribute is a struct field descriptor)
        config = OpenAIConfig(model=arg, base_url=base_url or os.environ.get("OPENAI_BASE_URL", default_url))
        return OpenAIPolicy(config), f"OpenAI-compatible API ({config.base_url}, model {arg})"
    raise ValueError(f"unknown --agent {agent!r}: use scripted, scripted:PATH or openai:MODEL")


def _eval_subset(options: dict[str, str]) -> tuple[int | None, int]:
    """(eval_limit, eval_seed) the CPU trainer will score with: its baselines must be frozen the same way."""
    try:
        limit = int(options["eval_limit"]) if "eval_limit" in options else None
        seed = int(options.get("eval_seed", "0"))
    except ValueError:
        raise ValueError(
            f"--trainer-opt eval_limit={options.get('eval_limit')!r} / eval_seed={options.get('eval_seed')!r}: "
            "expected whole numbers"
        ) from None
    if limit is not None and limit < 1:
        raise ValueError(f"--trainer-opt eval_limit={limit}: must be at least 1")
    return limit, seed


def _baselines(
    trainer: str, family: str, models: list[str], options: dict[str, str], console: Any
) -> tuple[list[BaselineFrozen], str]:
    """The baselines this episode's job is compared with: ``family`` x the spec's ``models``, frozen on the
    hidden tasks the job will be scored on (freezing what is missing, with progress, on first use)."""
    from cli.first_use import baselines_path_for, freeze_with_progress
    from families import key_fingerprint
    from handlers.reward.baselines import BaselinesError, frozen_events

    if trainer not in INNER_OF:
        return [], "none frozen (a succeeded job cannot be scored for uplift)"
    limit, eval_seed = _eval_subset(options)
    if eval_seed != 0:
        return [], f"none: eval_seed={eval_seed} differs from the frozen baselines' seed 0"
    path = baselines_path_for(limit)
    fingerprint = key_fingerprint()
    try:
        frozen = frozen_events(path, key_fingerprint=fingerprint) if path.exists() else []
    except BaselinesError as exc:
        # Baselines frozen under another installation key scored other hidden sets: refuse them, loudly.
        raise SystemExit(
            f"ait episode: {exc}\nThe eval key changed since these baselines were frozen: re-freeze them with "
            f"`ait baselines --inner {INNER_OF[trainer]} --force`, or restore the key file they were frozen under."
        ) from None
    have = {e.model for e in frozen if e.family == family}
    note = str(path)
    if not set(models) <= have:
        # The tiny CPU bases score a family's hidden eval in seconds each: freeze what is missing on first use
        # (the hidden sets are this machine's own, from its key, so no committed file could hold them).
        freeze_with_progress(path, family, models, fingerprint, limit=limit, seed=eval_seed, console=console)
        frozen = frozen_events(path, key_fingerprint=fingerprint)
        note = f"{path} (frozen now for {family} under key {fingerprint})"
    # best_pre is the best base the job could have picked: the models the task spec allows, nothing else.
    return [e for e in frozen if e.family == family and e.model in models], note


def default_deps(args: EpisodeOptions, console: Any = None) -> EpisodeDeps:
    from rich.console import Console

    from adapters.probe import ProbeValidator
    from families.spec import load_spec

    console = console if console is not None else Console(stderr=True)
    spec = load_spec(args.task)
    multi = spec.episode is not None and spec.episode.max_jobs > 1
    policy, policy_desc = make_policy(args.agent, spec.family, args.base_url, multi=multi)
    validator = ProbeValidator(unsafe_no_sandbox=args.unsafe_no_sandbox)
    models = list(spec.bounds.base_models)
    baselines, baselines_desc = (
        ([], "not needed (--no-job)")
        if args.no_job
        else _baselines(args.trainer, spec.family, models, dict(args.trainer_options), console)
    )
    # A job whose uplift cannot be scored is not worth running: without a frozen baseline for this family the
    # episode stops after validation and says how to get one (the job stays queued in the log).
    no_job_reason = "--no-job was given" if args.no_job else ""
    if not no_job_reason and not any(b.family == spec.family for b in baselines):
        no_job_reason = (
            f"the {args.trainer} trainer has no frozen baseline to score a job's uplift against (its scores are "
            f"not hidden-eval scores), so the episode stops here: drain the queued job with "
            f"`ait worker RUN --once --trainer {args.trainer}`, or use --trainer cpu"
        )
    ran_on = {
        "agent": policy_desc,
        "validation": "sandboxed probe (isolation reported per submission in the log)",
        "baselines": baselines_desc,
    }

    def local_pods(once: bool) -> tuple[WorkerOptions, Any]:
        from cli.sandbox_opt import trainer_opts
        from handlers.fleet.policy import FleetConfig

        options = trainer_opts(args.trainer_options, args.unsafe_no_sandbox, args.trainer)
        ns = WorkerOptions(provider="local", trainer=args.trainer, trainer_options=options, once=once)
        return ns, FleetConfig.from_mapping({"max_pods": 1, "ladder": ("local",)}, source="ait episode")

    async def run_job(rt: Any, job_id: str) -> None:
        from cli.worker_wiring import dispatch, worker_ports
        from engine.rundir import RunDir
        from handlers.budget.prices import load_prices

        ns, config = local_pods(once=True)
        run_dir = RunDir(rt.directory)
        async with worker_ports(ns, run_dir, config) as (provider, agent, _where):
            summary = await dispatch(rt, run_dir, ns, config, load_prices(), provider, agent)
        if summary.status != "drained":
            raise RuntimeError(f"job {job_id}: the local worker stopped with {summary.status}: {summary.message}")

    @contextlib.asynccontextmanager
    async def serve_jobs(rt: Any) -> AsyncIterator[None]:
        from cli.worker_wiring import dispatcher_running

        ns, config = local_pods(once=False)
        async with dispatcher_running(rt, ns, config) as serving:
            yield
        if serving.final is not None and serving.final.status != "drained":
            final = serving.final
            raise JobsNotDrained(f"the episode's jobs: the local worker stopped with {final.status}: {final.message}")

    ran_on["jobs"] = f"not run: {no_job_reason}" if no_job_reason else f"local pod agent, trainer {args.trainer}"
    if not no_job_reason and args.trainer == "cpu":
        # The job line names the spec's base model; say that the CPU trainer trains its tiny stand-in, so that no
        # reader takes the uplift for the real model's.
        ran_on["jobs"] += f" ({_stand_ins(models)})"
    return EpisodeDeps(
        policy=policy,
        validator=validator,
        job_runner=None if no_job_reason else run_job,
        job_server=None if no_job_reason else serve_jobs,
        baselines=baselines,
        ran_on=ran_on,
    )


def _stand_ins(models: list[str]) -> str:
    from adapters.tiny.specs import resolve_model_name

    named = []
    for model in models:
        try:
            named.append(f"{resolve_model_name(model)} standing in for {model}")
        except KeyError:
            named.append(f"{model}: no tiny stand-in")
    return ", ".join(named) + ": fixtures/tiny"
