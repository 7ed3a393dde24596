"""Choosing the concrete adapters for ``ait episode``: the agent policy, the probe, the job runner, baselines.

With no API keys and no flags: the scripted agent (``fixtures/trajectories/<family>_good.json``), the
sandboxed probe, local subprocess pods running the embedded CPU trainer, and the CPU baselines file.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.options import EpisodeOptions, WorkerOptions
from events import BaselineFrozen

__all__ = ["REPO", "EpisodeDeps", "JobRunner", "default_deps", "make_policy"]

# A job runner drains the run's queue until the given job has an outcome event in the log.
JobRunner = Callable[[Any, str], Awaitable[None]]


@dataclass
class EpisodeDeps:
    """The concrete adapters, chosen by the CLI (tests inject fakes)."""

    policy: Any  # handlers.ports.policy.AgentPolicy
    validator: Any  # handlers.ports.validator.Validator
    job_runner: JobRunner | None  # None: stop after validation
    baselines: list[BaselineFrozen]  # what the run's rewards compare with, as frozen (with n and key)
    ran_on: dict[str, str]  # what each part ran on, printed at the end


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
        config = OpenAIConfig(model=arg, base_url=base_url or os.environ.get("OPENAI_BASE_URL", OpenAIConfig.base_url))
        return OpenAIPolicy(config), f"OpenAI-compatible API ({config.base_url}, model {arg})"
    raise ValueError(f"unknown --agent {agent!r}: use scripted, scripted:PATH or openai:MODEL")


def _baselines(trainer: str, family: str) -> tuple[list[BaselineFrozen], str]:
    from families import key_fingerprint
    from handlers.reward.baselines import BaselinesError, default_baselines_path, frozen_events, scores_of

    if trainer not in INNER_OF:
        return [], "none frozen (a succeeded job cannot be scored for uplift)"
    path = default_baselines_path(INNER_OF[trainer])
    fingerprint = key_fingerprint()
    try:
        frozen = frozen_events(path, key_fingerprint=fingerprint) if path.exists() else []
    except BaselinesError as exc:
        # Baselines frozen under another installation key scored other hidden sets: refuse them, loudly.
        raise SystemExit(
            f"ait episode: {exc}\nThe eval key changed since these baselines were frozen: re-freeze them with "
            f"`ait baselines --inner {INNER_OF[trainer]} --force`, or restore the key file they were frozen under."
        ) from None
    if not scores_of(frozen).get(family):
        # The tiny CPU bases score a family's hidden eval in well under a minute: freeze them on first use
        # (the hidden sets are this machine's own, from its key, so no committed file could hold them).
        frozen = _freeze_cpu_baselines(path, family, fingerprint)
        return frozen, f"{path} (frozen now for {family} under key {fingerprint})"
    return frozen, str(path)


def _freeze_cpu_baselines(path: Path, family: str, fingerprint: str) -> list[BaselineFrozen]:
    import asyncio
    import datetime as dt
    import sys

    from cli.baselines_cmd import cpu_score_fn
    from families.spec import BASE_MODELS
    from handlers.reward.baselines import freeze_baselines, frozen_events

    sys.stderr.write(f"ait episode: no CPU baseline for {family} under this eval key yet: freezing it ({path})\n")
    asyncio.run(
        freeze_baselines(
            cpu_score_fn(seed=0, limit=None),
            families=[family],
            models=list(BASE_MODELS),
            inner="cpu",
            out_path=path,
            created=dt.datetime.now(dt.UTC).date().isoformat(),
            key_fingerprint=fingerprint,
        )
    )
    return frozen_events(path, key_fingerprint=fingerprint)


def default_deps(args: EpisodeOptions) -> EpisodeDeps:
    from adapters.probe import ProbeValidator
    from families.spec import load_spec

    spec = load_spec(args.task)
    multi = spec.episode is not None and spec.episode.max_jobs > 1
    policy, policy_desc = make_policy(args.agent, spec.family, args.base_url, multi=multi)
    validator = ProbeValidator()
    baselines, baselines_desc = ([], "not needed (--no-job)") if args.no_job else _baselines(args.trainer, spec.family)
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

    async def run_job(rt: Any, job_id: str) -> None:
        from cli.worker_wiring import dispatch, worker_ports
        from engine.rundir import RunDir
        from handlers.budget.prices import load_prices
        from handlers.fleet.policy import FleetConfig

        ns = WorkerOptions(provider="local", trainer=args.trainer, trainer_options=args.trainer_options, once=True)
        config = FleetConfig.from_mapping({"max_pods": 1, "ladder": ("local",)}, source="ait episode")
        run_dir = RunDir(rt.directory)
        async with worker_ports(ns, run_dir, config) as (provider, agent, _where):
            summary = await dispatch(rt, run_dir, ns, config, load_prices(), provider, agent)
        if summary.status != "drained":
            raise RuntimeError(f"job {job_id}: the local worker stopped with {summary.status}: {summary.message}")

    ran_on["jobs"] = f"not run: {no_job_reason}" if no_job_reason else f"local pod agent, trainer {args.trainer}"
    return EpisodeDeps(
        policy=policy,
        validator=validator,
        job_runner=None if no_job_reason else run_job,
        baselines=baselines,
        ran_on=ran_on,
    )
