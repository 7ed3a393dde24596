"""The composition root of ``ait worker``: concrete provider, pod-agent client, tokens and pod specs.

Only this module (and the CLI around it) names concrete adapters; the dispatcher sees ports.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog

from adapters.pod.tokens import TOKEN_ENV, PodTokens
from cli.options import ProviderName, WorkerOptions
from engine.rundir import RunDir
from engine.runtime import Runtime
from handlers.budget.prices import PriceTable, UnknownPrice, load_prices
from handlers.budget.rules import BudgetGate, BudgetProjection, BudgetState
from handlers.fleet.context import EvalPackages, Ports, SpecFactory
from handlers.fleet.dispatcher import Dispatcher, DispatcherFatal, DispatchSummary
from handlers.fleet.policy import SEED_LADDER, FleetConfig, parse_rung
from handlers.fleet.projection import FleetProjection
from handlers.fleet.queue import QueueProjection
from handlers.ports.pod_agent import PodAgent
from handlers.ports.provider import PodSpec, Provider, ProviderAuthError

if TYPE_CHECKING:
    from adapters.prime_rl.start import StartPlan

__all__ = [
    "DEFAULT_POD_IMAGE",
    "POD_AGENT_COMMAND",
    "Serving",
    "WorkerSetupError",
    "default_ladder",
    "dispatch",
    "dispatch_ports",
    "dispatcher_running",
    "fleet_projections",
    "local_command",
    "run_worker",
    "runpod_start",
    "spec_factory",
    "start_plan",
    "worker_ports",
]

log = structlog.get_logger("ait.worker")

#: The image a Runpod pod starts from when none is given: a CUDA image with Python, git and curl, on which the
#: start command installs everything (minutes per pod); an image built from docker/Dockerfile skips that.
DEFAULT_POD_IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"
_AGENT_PORT = 8000

#: What a local pod runs: ``ait pod-agent`` under this interpreter (the local provider is handed this command).
POD_AGENT_COMMAND = (sys.executable, "-m", "cli", "pod-agent")


def controller_version() -> str:
    """This project's installed version: the pods must run the same."""
    from importlib.metadata import PackageNotFoundError, version

    from adapters.prime_rl.start import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        raise WorkerSetupError(
            f"{DISTRIBUTION} is not installed here (run from an installed checkout: uv sync), so its version "
            "for the pods is unknown"
        ) from None


def start_plan(opts: WorkerOptions, **overrides: Any) -> StartPlan:
    """The pod start command's plan: this project at the controller's version, the bootstrap for prime_rl."""
    from adapters.prime_rl.start import StartPlan

    plan = StartPlan(ait_version=controller_version(), ait_source=opts.ait_source, bootstrap=opts.trainer == "prime_rl")
    return msgspec.structs.replace(plan, **overrides) if overrides else plan


def runpod_start(opts: WorkerOptions) -> str:
    """Runpod's ``args`` for a pod: the start script (install or verify, then the agent on the proxied port,
    its token from the environment, self-checking before its first job)."""
    from adapters.prime_rl.start import runpod_args, start_script

    agent = ("--host", "0.0.0.0", "--port", str(_AGENT_PORT), "--token-env", TOKEN_ENV, "--trainer", opts.trainer)
    return runpod_args(start_script(start_plan(opts)), agent)


def local_command(opts: WorkerOptions, state_dir: Path) -> tuple[str, ...]:
    """What a local pod runs: the agent itself, or, for prime_rl (a local GPU machine), the start script first
    (its bootstrap under ``$AIT_ROOT``, default ``<state_dir>/ait``, done once: a marker file)."""
    if opts.trainer != "prime_rl":
        return POD_AGENT_COMMAND  # nothing to install or verify: the CPU trainer and the stand-in need no GPU stack
    from adapters.prime_rl.start import start_script

    root = os.environ.get("AIT_ROOT") or str(state_dir / "ait")
    plan = start_plan(opts, root=root, ait_python=sys.executable, agent=POD_AGENT_COMMAND)
    state_dir.mkdir(parents=True, exist_ok=True)
    script = state_dir / "start.sh"
    script.write_text(start_script(plan))
    return ("bash", str(script))


class WorkerSetupError(Exception):
    """The worker cannot start (bad flags, unknown GPU price, missing credentials); the message says why."""


def fleet_projections() -> list[Any]:
    """The domain projections plus the queue and the fleet (once, whether or not the registry has them)."""
    from handlers.registry import default_projections

    projections: list[Any] = default_projections()
    names = {p.name for p in projections}
    projections += [p for p in (QueueProjection(), FleetProjection()) if p.name not in names]
    return projections


def eval_packages() -> EvalPackages:
    """Hidden eval packages built here, under this engine's installation key (once per family and process)."""
    import asyncio

    from families.eval_env import pack_eval_package

    built: dict[str, asyncio.Future[bytes]] = {}

    async def package(family: str) -> bytes:
        # Single flight: pods asking for the same family at once share one build (it takes seconds).
        if family not in built:
            built[family] = asyncio.ensure_future(asyncio.to_thread(pack_eval_package, family))
        flight = built[family]
        try:
            return await asyncio.shield(flight)
        except Exception:
            if built.get(family) is flight:
                del built[family]  # a failed build is tried again by the next caller
            raise

    return package


def spec_factory(opts: WorkerOptions, config: FleetConfig) -> SpecFactory:
    pins = {f"AIT_PIN_{k.upper()}": v for k, v in sorted(config.pins.items())}
    # The start command is the same for every pod of a run: built once (it is checked when the worker starts).
    start = runpod_start(opts) if opts.provider == "runpod" else ""

    def spec(gpu_type: str, pod_id: str, token: str) -> PodSpec:
        env = {TOKEN_ENV: token, "AIT_POD_ID": pod_id, **pins}
        if opts.provider == "runpod":
            image = opts.image or DEFAULT_POD_IMAGE
            return PodSpec(gpu_type=gpu_type, image=image, agent_port=_AGENT_PORT, env=env, args=start)
        return PodSpec(gpu_type=gpu_type, image=opts.image or opts.provider, env=env)

    return spec


@contextlib.asynccontextmanager
async def worker_ports(
    opts: WorkerOptions, run_dir: RunDir, config: FleetConfig
) -> AsyncIterator[tuple[Provider, PodAgent, str]]:
    """The provider, the pod-agent client, and a one-line description of where pods run."""
    if opts.provider == "local":
        from adapters.local_provider import LocalProvider
        from adapters.pod.client import HttpPodAgent

        state_dir = run_dir.root.parent / ".local-pods"
        provider = LocalProvider(
            local_command(opts, state_dir),
            state_dir,
            trainer=opts.trainer,
            trainer_options=opts.trainer_options,
        )
        async with HttpPodAgent() as agent:
            yield provider, agent, f"local subprocess pods (trainer {opts.trainer})"
    elif opts.provider == "runpod":
        from adapters.pod.client import HttpPodAgent
        from adapters.runpod import RunpodProvider

        try:
            runpod = RunpodProvider.from_env()
        except ProviderAuthError as exc:
            raise WorkerSetupError(str(exc)) from None
        try:
            async with HttpPodAgent(timeout_s=60.0) as agent:
                yield runpod, agent, f"Runpod pods ({opts.image or DEFAULT_POD_IMAGE})"
        finally:
            await runpod.aclose()
    else:
        from adapters.pod.inproc import InProcessAgents
        from adapters.pod.standin import StandinTrainer
        from adapters.sim import SimProvider

        sim = SimProvider(clock=time.monotonic, provision_median_s=0.5)
        agents = InProcessAgents(lambda: StandinTrainer(steps=3, step_s=0.2))
        try:
            yield sim, agents, "a simulated provider with in-process stand-in agents (nothing real ran)"
        finally:
            await agents.close()


def _check_prices(prices: PriceTable, config: FleetConfig) -> None:
    for rung in config.all_rungs:  # every model's ladder; a rung "2x <type>" is priced per GPU of <type>
        try:
            prices.gpu(parse_rung(rung)[0])
        except UnknownPrice as exc:
            raise WorkerSetupError(f"fleet ladder: {exc}") from None


def default_ladder(provider: ProviderName) -> tuple[str, ...]:
    """The GPU types a provider's pods are asked for when no ladder is given."""
    if provider == "local":
        return ("local",)
    if provider == "runpod":
        return SEED_LADDER
    from adapters.sim import DEFAULT_LADDER

    return tuple(g.gpu_type for g in DEFAULT_LADDER)


async def run_worker(opts: WorkerOptions, run_dir: RunDir, config: FleetConfig) -> DispatchSummary:
    prices = load_prices()
    _check_prices(prices, config)
    out = sys.stdout
    tag = "[SIMULATED] " if opts.provider == "sim" else ""
    # The ports first: a credentials or configuration problem is reported before the run's log is opened.
    async with worker_ports(opts, run_dir, config) as (provider, agent, where):
        out.write(
            f"{tag}ait worker: run {run_dir.run_id} on {where}; ladder {', '.join(config.ladder)}; "
            f"max {config.max_pods} pods{'; until the queue is empty' if opts.once else ''}\n"
        )
        out.flush()
        async with Runtime(run_dir.root, fleet_projections()) as rt:
            if not isinstance(rt.state(BudgetProjection), BudgetState) or rt.state(BudgetProjection).run_cap is None:
                log.warning("worker.no_run_budget", run=run_dir.run_id)
            summary = await dispatch(rt, run_dir, opts, config, prices, provider, agent)
    out.write(
        f"{tag}ait worker: {summary.status}: {summary.succeeded} succeeded, {summary.failed} failed, "
        f"{summary.waiting} waiting{': ' + summary.message if summary.message else ''}\n"
    )
    out.flush()
    return summary


def dispatch_ports(
    rt: Runtime,
    run_dir: RunDir,
    opts: WorkerOptions,
    config: FleetConfig,
    prices: PriceTable,
    provider: Provider,
    agent: PodAgent,
) -> Ports:
    """The dispatcher's ports for an open runtime (``ait train`` runs a long-lived dispatcher on them)."""
    return Ports(
        provider=provider,
        agent=agent,
        gate=BudgetGate.for_runtime(rt, prices),
        blobs=run_dir.blobs,
        tokens=PodTokens(run_dir.root / "secrets" / "pod-token.key"),
        spec_for=spec_factory(opts, config),
        eval_packages=eval_packages(),
    )


@dataclass
class Serving:
    """What :func:`dispatcher_running` ran on, and how its final drain ended (set when the block has exited)."""

    where: str
    final: DispatchSummary | None = None


@contextlib.asynccontextmanager
async def dispatcher_running(rt: Runtime, opts: WorkerOptions, config: FleetConfig) -> AsyncIterator[Serving]:
    """A long-lived dispatcher on ``opts``' pods for the duration of the block (its pods stay up between jobs,
    within the idle TTL); then the queued jobs are drained and every pod is terminated. ``ait train`` serves its
    run's jobs this way, and ``ait episode`` the jobs of a multi-job episode (one pod for all of them, not one each).
    """
    run_dir = RunDir(rt.directory)
    async with worker_ports(opts, run_dir, config) as (provider, agent, where):
        serving = Serving(where)
        ports = dispatch_ports(rt, run_dir, opts, config, load_prices(), provider, agent)
        async with anyio.create_task_group() as tg:
            tg.start_soon(Dispatcher(rt, ports, config).run)
            yield serving
            tg.cancel_scope.cancel()
        serving.final = await Dispatcher(rt, ports, config, once=True).run()


async def dispatch(
    rt: Runtime,
    run_dir: RunDir,
    opts: WorkerOptions,
    config: FleetConfig,
    prices: PriceTable,
    provider: Provider,
    agent: PodAgent,
) -> DispatchSummary:
    """Run the dispatcher inside an open runtime (whose projections include the queue and the fleet)."""
    ports = dispatch_ports(rt, run_dir, opts, config, prices, provider, agent)
    try:
        return await Dispatcher(rt, ports, config, once=opts.once).run()
    except DispatcherFatal as exc:
        raise WorkerSetupError(str(exc)) from None
