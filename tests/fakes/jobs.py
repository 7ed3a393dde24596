"""A fake job runner at the log's level: a reactor that plays each queued job's progress and outcome.

It stands where the fleet (dispatcher, pods, inner trainer) stands in a real run: on ``job.queued`` it records a
pre-score progress event (carrying the hidden pre-score, as the CPU trainer does), ``steps`` training steps, a
post-score progress event (the hidden post-score) and ``job.succeeded`` with hidden pre/post and the dev scores
in ``metrics`` (jobs in ``adopt`` are played at start, as a resumed run's adopted jobs). ``outcomes`` maps a
job id to (hidden pre, hidden post, dev pre, dev post); a job id in ``fail``
fails instead. ``hold`` keeps jobs from finishing until the event is set (jobs in flight).
"""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.runtime import Runtime
from events import JobFailed, JobProgressed, JobQueued, JobStarted, JobSucceeded, Recorded

__all__ = ["FakeJobs"]


class FakeJobs:
    def __init__(
        self,
        outcomes: dict[str, tuple[float, float, float, float]],
        *,
        steps: int = 3,
        train_seconds: float = 40.0,
        fail: frozenset[str] = frozenset(),
        hold: anyio.Event | None = None,
        adopt: tuple[str, ...] = (),
    ) -> None:
        self.outcomes = outcomes
        self.steps = steps
        self.train_seconds = train_seconds
        self.fail = fail
        self.hold = hold
        self.adopt = adopt  # jobs a resumed run finds in flight: played from the start, as a reconnect would
        self.queued: list[str] = []

    async def __call__(self, rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        async with anyio.create_task_group() as tg:
            for job_id in self.adopt:
                tg.start_soon(self._play, rt, job_id)
            async for rec in stream:
                if isinstance(rec.event, JobQueued):
                    self.queued.append(rec.event.job_id)
                    tg.start_soon(self._play, rt, rec.event.job_id)

    async def _play(self, rt: Runtime, job_id: str) -> None:
        pre, post, dev_pre, dev_post = self.outcomes[job_id]
        await rt.emit(JobStarted(job_id=job_id, pod_id="pod-fake", attempt=1))
        await rt.emit(JobProgressed(job_id=job_id, step=0, phase="pre_score", reward=pre))
        for step in range(1, self.steps + 1):
            await rt.emit(
                JobProgressed(job_id=job_id, step=step, phase="train", reward=0.1 * step, loss=0.5, total_steps=3)
            )
        if self.hold is not None:
            await self.hold.wait()
        if job_id in self.fail:
            await rt.emit(JobFailed(job_id=job_id, reason="trainer_crash", detail="fake crash", attempt=1))
            return
        await rt.emit(JobProgressed(job_id=job_id, step=self.steps, phase="post_score", reward=post))
        await rt.emit(
            JobSucceeded(
                job_id=job_id,
                pre=pre,
                post=post,
                train_seconds=self.train_seconds,
                timings={"total": self.train_seconds + 20.0},
                metrics={"dev_pre": dev_pre, "dev_post": dev_post},
                attempt=1,
            )
        )
