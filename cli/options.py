"""Typed options of the commands that share wiring: what ``ait episode`` and ``ait worker`` were asked to do.

Each command parses its flags (or its run config) into one of these once; the wiring below it takes the typed
object, never an ``argparse.Namespace``, so ``ait episode`` and ``ait train`` reuse the worker's wiring without
fabricating command-line arguments.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["EpisodeOptions", "ProviderName", "WorkerOptions"]

ProviderName = Literal["local", "runpod", "sim"]


class WorkerOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Where a run's jobs go: the provider, the inner trainer its pods run, and the pod image."""

    provider: ProviderName = "local"
    trainer: str = "standin"
    #: inner-trainer options, passed to local pods as ``--trainer-opt K=V``
    trainer_options: dict[str, str] = {}
    image: str = ""  # runpod: the container image ("": a CUDA base image, the start command installs the rest)
    #: a pip requirement installing this project on a pod that lacks it ("": ai-trains-ai==<controller's version>)
    ait_source: str = ""
    once: bool = False  # exit once the queue is empty, terminating every pod


class EpisodeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """One ``ait episode``: the task, the agent, the limits and the job's trainer."""

    task: str
    runs_root: str
    agent: str = "scripted"
    base_url: str | None = None
    run_id: str | None = None
    seed: int = 0
    max_attempts: int = 3
    max_turns: int = 40
    episode_budget_usd: float = 2.0
    run_budget_usd: float = 100.0
    no_job: bool = False
    trainer: str = "cpu"
    trainer_options: dict[str, str] = {}
    #: run agent code even without bubblewrap (recorded in the run as run.sandbox_opted_out)
    unsafe_no_sandbox: bool = False
