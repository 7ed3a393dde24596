"""Inner trainers by name, for ``ait pod-agent --trainer NAME``: imported only when chosen.

The registry maps a name to ``"module:factory"``; the factory takes the ``--trainer-opt key=value`` options and
returns an :class:`~handlers.ports.inner_trainer.InnerTrainer`. Heavy trainers (torch, vLLM) therefore cost nothing
until selected, and the agent's startup path stays light. Adding a trainer is one line here. A full
``module:factory`` spec is also accepted (tests load their fake trainer that way).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import cast

from handlers.ports.inner_trainer import InnerTrainer, JobBundle, JobResult, ProgressCallback

__all__ = ["TRAINERS", "UnavailableTrainer", "load_trainer", "parse_options"]

TRAINERS: dict[str, str] = {
    "standin": "adapters.pod.standin:make_trainer",
    "prime_rl": "adapters.prime_rl.factory:make_trainer",
    "cpu": "adapters.cpu_trainer:make_trainer",  # the embedded tiny-model trainer (the default locally)
}


def parse_options(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``, with an error naming the bad item."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--trainer-opt {item!r}: expected key=value")
        out[key] = value
    return out


def load_trainer(name: str, options: Mapping[str, str] | None = None) -> InnerTrainer:
    spec = TRAINERS.get(name, name if ":" in name else "")
    if not spec:
        raise ValueError(f"unknown trainer {name!r}; known: {sorted(TRAINERS)} (or a module:factory spec)")
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"trainer {name!r}: cannot load {spec}: {exc}") from None
    return cast(InnerTrainer, factory(dict(options or {})))


class UnavailableTrainer:
    """Stands in for a trainer that could not be built on this machine (prime-rl on a pod without a GPU), so
    that the agent still serves and its failed self-check says why; it never runs a job (the agent refuses
    jobs while the check has failed), and would fail one with the reason if asked."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        return JobResult(
            job_id=job.job_id, ok=False, failure="trainer_crash", detail=f"trainer unavailable: {self.reason}"
        )
