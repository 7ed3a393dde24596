"""The inner-trainer contract for the prime-rl runner, on CPU with the stand-in ``uv``, ``rl`` and ``inference``
executables (fixtures/prime_rl/standins) and a fake hidden-eval scorer, as the runner's own tests run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.prime_rl.runner import PrimeRLRunner
from handlers.ports.inner_trainer import InnerTrainer, JobBundle
from tests.contracts.inner_trainer_contract import InnerTrainerContract

from .conftest import SkillScorer, eval_source_for, make_bundle, standin_settings

pytestmark = pytest.mark.timeout(120)


class TestPrimeRLRunner(InnerTrainerContract):
    def make_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        source = eval_source_for(request.getfixturevalue("eval_pkg_root"))
        return PrimeRLRunner(standin_settings(tmp), scorer=SkillScorer(), eval_source=source)

    def good_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return make_bundle(tmp, max_steps=2)

    def bad_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        job = make_bundle(tmp)
        toml = job.path / "job.toml"  # not a multiple of group_size: refused before any process starts
        toml.write_text(toml.read_text().replace("batch_size = 16", "batch_size = 12"))
        return job
