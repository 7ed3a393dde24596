"""The end-of-run summary of ``ait train`` says what happened to each step: a control's steps are not applied."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cli.train_summary import summary_lines
from handlers.budget.rules import BudgetProjection
from handlers.fleet.queue import QueueProjection
from handlers.reward.projection import RewardsProjection
from handlers.training.projection import StepRecord, TrainingProjection, TrainingState


class _Runtime:
    """Just what ``summary_lines`` reads: the projections' states, the run id and the log's path."""

    run_id = "r"
    log = SimpleNamespace(path="r/events.jsonl")

    def __init__(self) -> None:
        done = StepRecord(step=0, n_datums=8, n_tokens=100, applied=True, sampler_path="s1", state_path="t1")
        self.states: dict[type, Any] = {
            TrainingProjection: TrainingState(steps={"0": done}, step=1, sampler_version=1),
            RewardsProjection: RewardsProjection().initial(),
            QueueProjection: QueueProjection().initial(),
            BudgetProjection: BudgetProjection().initial(),
        }

    def state(self, projection: type) -> Any:
        return self.states[projection]


def test_a_learning_run_says_its_steps_were_applied() -> None:
    lines = summary_lines(_Runtime(), {"learner": "local"})
    assert lines[0] == "run r: 1 learner step(s) applied, sampler v1"
    assert lines[1].endswith("(applied)")


def test_a_control_run_never_says_applied() -> None:
    lines = summary_lines(_Runtime(), {"learner": "local"}, control=True)
    assert lines[0] == "run r: 1 learner step(s) computed, none applied (the no-learning control), sampler v1"
    assert lines[1].endswith("(computed, not applied)")
    assert not any(line.endswith("(applied)") for line in lines)
