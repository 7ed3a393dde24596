"""The learner contract for the Tinker learner (over the SDK-shaped fake service), the offline learner, and the
test fake."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from adapters.tinker.offline import OfflineLearner
from handlers.ports.learner import LearnerPort
from tests.contracts.learner_contract import LearnerContract, MakeLearner
from tests.fakes.learner import FakeLearner

# find_spec, not importorskip: collection must not import tinker (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("tinker") is None, reason="tinker is not installed")


class TestTinkerLearner(LearnerContract):
    @property
    def resume_errors(self) -> tuple[type[BaseException], ...]:  # type: ignore[override]
        import tinker  # here, not at collection (issue 18)

        return (tinker.RequestFailedError,)

    def learners(self, tmp_path: Path) -> MakeLearner:
        from adapters.tinker.learner import TinkerLearner
        from tests.fakes.tinker import FakeTinker

        self.service = FakeTinker()  # pytest gives every test its own instance of this class
        return lambda path: TinkerLearner(self.service, base_model="Qwen/Qwen3-8B", rank=8, resume_state_path=path)

    def applied_steps(self, learner: LearnerPort) -> int:
        steps: int = self.service.clients[-1].state["steps"]  # the client the learner last built
        return steps


class TestOfflineLearner(LearnerContract):
    def learners(self, tmp_path: Path) -> MakeLearner:
        return lambda path: OfflineLearner(tmp_path / "run", resume_state_path=path)

    def applied_steps(self, learner: LearnerPort) -> int:
        assert isinstance(learner, OfflineLearner)
        return learner.state.steps


class TestFakeLearner(LearnerContract):
    def learners(self, tmp_path: Path) -> MakeLearner:
        store: dict[str, int] = {}
        return lambda path: FakeLearner(store=store, resume_state_path=path)

    def applied_steps(self, learner: LearnerPort) -> int:
        assert isinstance(learner, FakeLearner)
        return learner.applied
