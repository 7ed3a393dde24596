"""The inner-trainer contract: what every :class:`~handlers.ports.inner_trainer.InnerTrainer` promises its pod agent.

A subclass supplies the trainer and two job bundles: one it trains (:meth:`InnerTrainerContract.good_bundle`)
and one it fails in a classified way (:meth:`InnerTrainerContract.bad_bundle`, failing as
:attr:`InnerTrainerContract.expected_failure`; a fake that reads no bundle overrides
:meth:`InnerTrainerContract.make_failing_trainer` instead). Each is run once per subclass (training is the
expensive part); the tests read the recorded results and progress.

The promises:

- ``run`` returns a :class:`~handlers.ports.inner_trainer.JobResult` for the job it was given (its ``job_id``),
  and a failure is *returned*, classified (``ok`` false, a ``failure`` reason, a ``detail`` saying why), not
  raised; ``ok`` holds exactly when there is no failure;
- a successful result has ``pre`` and ``post`` hidden-eval scores in [0, 1] and states how they were sampled
  (``sampling``); ``train_seconds``, ``timings`` and ``metrics`` are finite numbers, the durations >= 0;
- progress reports training steps in order (from step 1; a step-0 report is a status message before the
  first step; never beyond ``total_steps``, never going back), with finite reward and loss where given, and no
  training step is reported after post-training scoring has begun;
- the result survives the trip from pod to controller (msgspec JSON) unchanged.
"""

from __future__ import annotations

import abc
import asyncio
import math
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from handlers.ports.inner_trainer import FailureReason, InnerTrainer, JobBundle, JobResult, Progress

__all__ = ["InnerTrainerContract", "Outcome", "run_job"]


class Outcome(msgspec.Struct, kw_only=True):
    """One recorded run: the job, what the trainer returned, and every progress report in order."""

    job: JobBundle
    result: JobResult
    progress: list[Progress]


def run_job(trainer: InnerTrainer, job: JobBundle) -> Outcome:
    seen: list[Progress] = []

    async def progress(p: Progress) -> None:
        seen.append(p)

    result = asyncio.run(trainer.run(job, progress))
    return Outcome(job=job, result=result, progress=seen)


def _finite(values: dict[str, float]) -> bool:
    return all(isinstance(v, float | int) and math.isfinite(v) for v in values.values())


class InnerTrainerContract(abc.ABC):
    #: how :meth:`bad_bundle` (or :meth:`make_failing_trainer`) fails
    expected_failure: ClassVar[FailureReason] = "config_error"

    @abc.abstractmethod
    def make_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        """The trainer under test (``request`` gives access to the implementation's own fixtures)."""

    @abc.abstractmethod
    def good_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        """A job bundle in ``tmp`` that this trainer trains and scores (kept as small as it allows)."""

    @abc.abstractmethod
    def bad_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        """A job bundle in ``tmp`` that this trainer fails as :attr:`expected_failure`."""

    def make_failing_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        return self.make_trainer(tmp, request)

    # Class-scoped: each implementation trains once for all the tests below.
    @pytest.fixture(scope="class")
    @classmethod
    def ok_run(cls, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Outcome:
        tmp, case = tmp_path_factory.mktemp("contract-ok"), cls()
        return run_job(case.make_trainer(tmp, request), case.good_bundle(tmp, request))

    @pytest.fixture(scope="class")
    @classmethod
    def failed_run(cls, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Outcome:
        tmp, case = tmp_path_factory.mktemp("contract-bad"), cls()
        return run_job(case.make_failing_trainer(tmp, request), case.bad_bundle(tmp, request))

    # ---- the promises ------------------------------------------------------------------------------

    def test_it_has_a_name(self, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        name = self.make_trainer(tmp_path, request).name
        assert isinstance(name, str) and name and not name.isspace()

    def test_a_job_it_trains_returns_an_ok_result_for_that_job(self, ok_run: Outcome) -> None:
        r = ok_run.result
        assert isinstance(r, JobResult)
        assert r.job_id == ok_run.job.job_id
        assert (r.ok, r.failure) == (True, None), r.detail

    def test_an_ok_result_has_scores_in_the_unit_interval_and_states_their_sampling(self, ok_run: Outcome) -> None:
        r = ok_run.result
        assert r.pre is not None and r.post is not None
        assert 0.0 <= r.pre <= 1.0 and 0.0 <= r.post <= 1.0
        assert r.sampling.strip(), "a result with scores must say how they were sampled"

    def test_durations_and_metrics_are_finite(self, ok_run: Outcome) -> None:
        r = ok_run.result
        assert math.isfinite(r.train_seconds) and r.train_seconds >= 0
        assert _finite(r.timings) and all(v >= 0 for v in r.timings.values())
        assert _finite(r.metrics)

    def test_progress_reports_training_steps_in_order(self, ok_run: Outcome) -> None:
        train = [p for p in ok_run.progress if p.phase == "train"]
        steps = [p.step for p in train]
        assert any(s >= 1 for s in steps), f"no training step was reported: {ok_run.progress}"
        assert steps == sorted(steps), steps  # step 0: a status message before the first step
        for p in train:
            assert p.step >= 0 and (p.total_steps == 0 or p.step <= p.total_steps), p
            assert all(x is None or math.isfinite(x) for x in (p.reward, p.loss)), p
        phases = [p.phase for p in ok_run.progress]
        if "post_score" in phases:
            assert phases.index("post_score") > max(i for i, ph in enumerate(phases) if ph == "train"), phases

    def test_a_failure_is_returned_classified_not_raised(self, failed_run: Outcome) -> None:
        r = failed_run.result
        assert r.job_id == failed_run.job.job_id
        assert (r.ok, r.failure) == (False, self.expected_failure), r.detail
        assert r.detail.strip(), "a failure must say why"

    def test_results_survive_the_trip_to_the_controller(self, ok_run: Outcome, failed_run: Outcome) -> None:
        for r in (ok_run.result, failed_run.result):
            assert msgspec.json.decode(msgspec.json.encode(r), type=JobResult) == r
