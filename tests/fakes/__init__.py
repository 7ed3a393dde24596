"""Shared fakes at the ports (validator, policies, providers). Tests import them from here, nowhere deeper."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cli import baselines_cmd
from events import CheckResult
from families.spec import TaskSpec
from handlers.ports.validator import ProbeReport
from handlers.reward.baselines import BaselineEntry

__all__ = ["CALC_SPEC_PATH", "MINIMAL_JOB_TOML", "FakeValidator", "fake_cpu_baselines"]

CALC_SPEC_PATH = Path(__file__).parents[2] / "examples" / "tasks" / "calc_chain_v1_fast.json"

# A job.toml an agent could submit for CALC_SPEC_PATH (within its bounds); the env package is not needed by a fake.
MINIMAL_JOB_TOML = """
[prime_rl]
model = "Qwen/Qwen3-0.6B"
learning_rate = 1e-5
max_steps = 5
batch_size = 16
group_size = 8

[env]
id = "calc-train"
"""


class FakeValidator:
    """Accepts from attempt ``accept_from`` on; records what it was asked. Runs no agent code."""

    def __init__(self, accept_from: int = 1) -> None:
        self.accept_from = accept_from
        self.calls: list[tuple[Path, str, int]] = []

    async def validate(self, workspace: Path, spec: TaskSpec, attempt: int) -> ProbeReport:
        self.calls.append((workspace, spec.name, attempt))
        ok = attempt >= self.accept_from and (workspace / "job.toml").exists()
        checks = [
            CheckResult(name="job_config", ok=(workspace / "job.toml").exists(), detail="job.toml present"),
            CheckResult(name="rubric_sanity", ok=ok, detail="" if ok else "reward cannot tell right from wrong"),
        ]
        return ProbeReport(ok=ok, checks=checks, seconds=0.01, parseable=True, isolation="fake")


def fake_cpu_baselines(monkeypatch: pytest.MonkeyPatch, score_of: Callable[[str], float]) -> list[tuple[str, str]]:
    """Replace the tiny models' hidden-eval scorer behind ``ait baselines --inner cpu`` (and ``ait episode``'s
    first-use freeze) with ``score_of(model)``; returns the (family, model) pairs it is asked to score."""
    calls: list[tuple[str, str]] = []

    def factory(
        *, seed: int, limit: int | None, on_turn: object = None, fresh: bool = False
    ) -> Callable[[str, str], object]:
        async def score(family: str, model: str) -> BaselineEntry:
            calls.append((family, model))
            n = limit or 200
            # As the real scorer does when it scores (not when its memo answers): the pair's progress callback.
            hook = on_turn(family, model) if callable(on_turn) else None
            if hook is not None:
                hook(1, 1, n, n)
            return BaselineEntry(score=score_of(model), n=n, sampling="T=1")

        return score

    monkeypatch.setattr(baselines_cmd, "cpu_score_fn", factory)
    return calls
