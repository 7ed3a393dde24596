"""Each inner job's training curve and how far it got, for reports of runs with few jobs (``ait episode``).

A projection over ``job.progressed`` (the train steps the pod agent streamed: step, mean reward, loss; the
pre- and post-score phases' scores), ``job.stopped_early``, and the scores and their n from
``job.succeeded``. A requeued attempt starts its curve afresh.
"""

from __future__ import annotations

import msgspec

from engine.projection import Projection, handles
from events import JobProgressed, JobStarted, JobStoppedEarly, JobSucceeded

__all__ = ["CurvePoint", "JobCurve", "JobCurvesProjection"]


class CurvePoint(msgspec.Struct, frozen=True, kw_only=True):
    step: int
    reward: float | None
    loss: float | None


class JobCurve(msgspec.Struct, kw_only=True):
    points: list[CurvePoint] = []
    total_steps: int = 0
    pre: float | None = None  # the job's own pre-score, as streamed
    post: float | None = None
    stopped: str = ""  # "stopped at step 4 of 10: deadline" when training was cut short
    eval_n: int = 0  # hidden tasks behind pre and post (0: not stated)


class JobCurvesProjection(Projection[dict[str, JobCurve]]):
    name = "job_curves"
    state_type = dict[str, JobCurve]

    def initial(self) -> dict[str, JobCurve]:
        return {}

    @handles(JobStarted)
    def _started(self, s: dict[str, JobCurve], e: JobStarted) -> dict[str, JobCurve]:
        s[e.job_id] = JobCurve()
        return s

    @handles(JobProgressed)
    def _progressed(self, s: dict[str, JobCurve], e: JobProgressed) -> dict[str, JobCurve]:
        curve = s.setdefault(e.job_id, JobCurve())
        if e.phase == "train":
            curve.points.append(CurvePoint(step=e.step, reward=e.reward, loss=e.loss))
            curve.total_steps = e.total_steps or curve.total_steps
        elif e.phase == "pre_score" and e.reward is not None:
            curve.pre = e.reward
        elif e.phase == "post_score" and e.reward is not None:
            curve.post = e.reward
        return s

    @handles(JobStoppedEarly)
    def _stopped(self, s: dict[str, JobCurve], e: JobStoppedEarly) -> dict[str, JobCurve]:
        curve = s.setdefault(e.job_id, JobCurve())
        curve.stopped = e.line()
        curve.total_steps = e.steps_total or curve.total_steps
        return s

    @handles(JobSucceeded)
    def _succeeded(self, s: dict[str, JobCurve], e: JobSucceeded) -> dict[str, JobCurve]:
        curve = s.setdefault(e.job_id, JobCurve())
        curve.pre, curve.post = e.pre, e.post
        curve.eval_n = int(e.metrics.get("eval_n", 0))
        return s
