"""The end-of-run summary of ``ait train`` says what happened to each step: a control's steps are not applied."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cli.train_summary import summary_lines
from events import JobFailed, JobQueued, Recorded
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


def test_the_jobs_line_says_how_many_failures_were_cancels() -> None:
    rt = _Runtime()
    q, queue = QueueProjection(), QueueProjection().initial()
    bodies = [
        *(JobQueued(job_id=j, episode_id=j, family="f", base_model="m", bundle="b") for j in ("a", "b", "c")),
        JobFailed(job_id="a", reason="oom"),
        JobFailed(job_id="b", reason="cancelled", detail="straggler of group g000001, closed short at step 2"),
    ]
    rt.states[QueueProjection] = q.fold((Recorded(i, float(i), b) for i, b in enumerate(bodies)), queue)
    [jobs] = [line for line in summary_lines(rt, {}) if line.startswith("inner jobs:")]
    assert jobs.startswith("inner jobs: 0 succeeded, 2 failed (1 cancelled: episode dropped), 1 unfinished")
    [plain] = [line for line in summary_lines(_Runtime(), {}) if line.startswith("inner jobs:")]
    assert "cancelled" not in plain
