"""The inner-trainer contract for the stand-in trainer and the test fakes. The CPU trainer's and prime-rl's
subclasses sit with their own fixtures: ``tests/adapters/cpu_trainer/test_trainer.py`` and
``tests/adapters/prime_rl/test_contract.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.pod.standin import StandinTrainer
from handlers.ports.inner_trainer import InnerTrainer, JobBundle
from tests.contracts.inner_trainer_contract import InnerTrainerContract
from tests.fakes import MINIMAL_JOB_TOML
from tests.fakes.inner import EvalScoringTrainer, FakeInnerTrainer


def bundle(tmp: Path, *, job_toml: str | None = MINIMAL_JOB_TOML, job_id: str = "job-contract") -> JobBundle:
    root = tmp / job_id
    root.mkdir()
    if job_toml is not None:
        (root / "job.toml").write_text(job_toml)
    return JobBundle(job_id=job_id, family="calc_chain", root=str(root))


class TestStandinTrainer(InnerTrainerContract):
    def make_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        return StandinTrainer(steps=2, step_s=0.0)

    def good_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp)

    def bad_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp, job_toml=None)


class TestFakeInnerTrainer(InnerTrainerContract):
    def make_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        return FakeInnerTrainer(steps=2)

    def make_failing_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        return FakeInnerTrainer(steps=1, failure="config_error")

    def good_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp)

    def bad_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp)


class TestEvalScoringTrainer(InnerTrainerContract):
    expected_failure = "scoring_error"

    def make_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        package = tmp / "package"
        (package / "ait-eval-calc-chain").mkdir(parents=True)
        manifest = {"tasks": 200, "fingerprint": "contract"}
        (package / "ait-eval-calc-chain" / "manifest.json").write_text(json.dumps(manifest))

        async def source(job: JobBundle) -> Path:  # what the pod agent binds: the controller's package
            return package

        trainer = EvalScoringTrainer(seconds=0.0)
        trainer.use_eval_source(source)
        return trainer

    def make_failing_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        return EvalScoringTrainer(seconds=0.0)  # no eval source bound: nothing to score on

    def good_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp)

    def bad_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp)
