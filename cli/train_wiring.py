"""Choosing the concrete adapters of ``ait train`` from its run config: the learner, the policy per sampler
version, the validator. The only place the outer loop meets Tinker: ``[backend] kind = "tinker"`` builds
``TinkerService`` / ``TinkerLearner`` / ``TinkerPolicy`` (never in tests); ``"local"`` builds the local learner
and its sampler server (adapters/local_learner: peft + torch, imported only here); ``"offline"`` builds the
offline backend, which learns nothing (adapters/tinker/offline.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cli.outer_episodes import PolicyFactory
from cli.train_config import RunConfig
from handlers.ports.policy import AgentPolicy
from handlers.ports.validator import Validator
from handlers.training import LearnerPort

__all__ = ["Backend", "make_backend", "make_validator"]


class Backend:
    """The learner and a policy factory over one backend, plus what they run on (printed and recorded)."""

    def __init__(
        self,
        learner: LearnerPort,
        policy_for: PolicyFactory,
        ran_on: dict[str, str],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.learner = learner
        self.policy_for = policy_for
        self.ran_on = ran_on
        self._close = close

    async def aclose(self) -> None:
        """Stop what the backend started (the local sampler server); a no-op for the others."""
        if self._close is not None:
            await self._close()


def _offline(cfg: RunConfig, run_dir: Path, resume_state_path: str, trajectory: Path | None) -> Backend:
    from adapters.agents import ScriptedPolicy, load_trajectory
    from adapters.tinker.offline import OfflineLearner, OfflinePolicy

    learner = OfflineLearner(run_dir, resume_state_path=resume_state_path)

    async def policy_for(episode_id: str, family: str, version: int, path: str) -> AgentPolicy:
        inner = ScriptedPolicy(load_trajectory(trajectory or cfg.trajectory_path(family)))
        return OfflinePolicy(inner, sampler_version=version, sampler_path=path)

    ran_on = {
        "learner": "offline backend (no model: learns nothing; checkpoints are counters under the run dir)",
        "agent": f"scripted trajectories ({cfg.agent.trajectories}/<family>_good.json) with toy token ids",
    }
    return Backend(learner, policy_for, ran_on)


def _local(cfg: RunConfig, run_dir: Path, resume_state_path: str) -> Backend:
    import httpx

    from adapters.local_learner.learner import LocalLearner
    from adapters.local_learner.sampler import LocalPolicy, LocalSamplerServer, SamplerPool

    outer = cfg.outer
    learner = LocalLearner(
        run_dir,
        base_model=outer.base_model,
        rank=outer.lora_rank,
        seed=cfg.run.seed,
        device=cfg.backend.device,
        resume_state_path=resume_state_path,
        learn=cfg.backend.learn,
    )
    # Versions older than the staleness bound train nothing; +2 keeps the newest and the one being published.
    pool = SamplerPool(
        run_dir,
        base_model=outer.base_model,
        rank=outer.lora_rank,
        keep=outer.max_steps_off_policy + 2,
        max_batch=cfg.backend.sampler_batch,
    )
    server = LocalSamplerServer(pool)
    transport = httpx.AsyncHTTPTransport()

    async def policy_for(episode_id: str, family: str, version: int, path: str) -> AgentPolicy:
        await server.start()  # on first use, in the run's event loop
        return LocalPolicy(
            base_url=server.base_url,
            transport=transport,
            sampler_path=path,
            sampler_version=version,
            max_tokens=outer.max_tokens,
            temperature=outer.temperature,
            label=family,
            # Each turn's sampling seed comes from (run seed, episode id, turn): same seed, same samples.
            episode_id=episode_id,
            seed=cfg.run.seed,
        )

    async def close() -> None:
        await transport.aclose()
        await server.stop()

    ran_on = {
        "learner": f"local LoRA ({outer.base_model}, rank {outer.lora_rank}, {outer.loss_fn}, on {learner.device})"
        + ("" if cfg.backend.learn else " NOT LEARNING: the control, no update applied"),
        "agent": f"local sampler server of {outer.base_model} (newest published LoRA merged)",
    }
    return Backend(learner, policy_for, ran_on, close)


def _tinker(cfg: RunConfig, resume_state_path: str) -> Backend:
    from adapters.tinker.learner import TinkerLearner
    from adapters.tinker.policy import TinkerPolicy
    from adapters.tinker.renderer import ChatTemplateRenderer
    from adapters.tinker.service import TinkerService

    outer = cfg.outer
    svc = TinkerService(base_url=cfg.backend.base_url or None)
    learner = TinkerLearner(svc, base_model=outer.base_model, rank=outer.lora_rank, resume_state_path=resume_state_path)
    renderer = ChatTemplateRenderer.from_pretrained(outer.base_model)
    samplers: dict[str, Any] = {}  # one sampling client per published path ("" = the base model)

    async def policy_for(episode_id: str, family: str, version: int, path: str) -> AgentPolicy:
        if path not in samplers:
            samplers[path] = await svc.create_sampling_client(path or None, None if path else outer.base_model)
        return TinkerPolicy(
            model=outer.base_model,
            renderer=renderer,
            sampler=samplers[path],
            sampler_version=version,
            max_tokens=outer.max_tokens,
            temperature=outer.temperature,
        )

    ran_on = {
        "learner": f"Tinker ({outer.base_model}, LoRA rank {outer.lora_rank}, {outer.loss_fn})",
        "agent": f"Tinker sampler of {outer.base_model} (chat-template renderer)",
    }
    return Backend(learner, policy_for, ran_on)


def make_backend(
    cfg: RunConfig, run_dir: Path, *, resume_state_path: str = "", trajectory: Path | None = None
) -> Backend:
    """``trajectory``: the scripted agent's trajectory for every family (``ait holdout --trajectory``)."""
    if cfg.backend.kind == "offline":
        return _offline(cfg, run_dir, resume_state_path, trajectory)
    if cfg.backend.kind == "local":
        return _local(cfg, run_dir, resume_state_path)
    return _tinker(cfg, resume_state_path)


def make_validator(cfg: RunConfig, *, unsafe: bool = False) -> tuple[Validator, str]:
    if cfg.episode.validator == "job_config":
        from adapters.config_validator import JobConfigValidator

        return JobConfigValidator(), "job.toml bounds only (no agent code run; not the probe)"
    from adapters.probe import ProbeValidator

    enforce = cfg.episode.rubric_check == "enforce"
    note = "" if enforce else "; rubric check reported, not enforced"
    if unsafe:
        return (
            ProbeValidator(unsafe_no_sandbox=True, enforce_rubric=enforce),
            f"probe (--unsafe-no-sandbox: bubblewrap not required{note})",
        )
    return ProbeValidator(enforce_rubric=enforce), "sandboxed probe" + (f" ({note[2:]})" if note else "")
