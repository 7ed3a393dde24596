"""A fake inner trainer at the :class:`~handlers.ports.inner_trainer.InnerTrainer` port: sleeps, reports progress,
returns what it is told to. Loadable in a pod-agent subprocess as ``--trainer tests.fakes.inner:make_trainer``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import msgspec

from handlers.ports.inner_trainer import FailureReason, JobBundle, JobResult, Progress, ProgressCallback

__all__ = ["EvalScoringTrainer", "FakeInnerTrainer", "OneSlowJob", "make_trainer"]


class FakeInnerTrainer:
    name = "fake"

    def __init__(
        self,
        *,
        seconds: float = 0.0,
        steps: int = 2,
        pre: float = 0.1,
        post: float = 0.4,
        failure: FailureReason | None = None,
        result: JobResult | None = None,
        error: Exception | None = None,
        spawn_child: bool = False,
    ) -> None:
        self.seconds = seconds
        self.steps = steps
        self.pre, self.post = pre, post
        self.failure = failure
        self.result = result
        self.error = error
        self.spawn_child = spawn_child  # start a `sleep` child (its pid in <bundle>/child.pid): process-group tests
        self.calls: list[JobBundle] = []

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        self.calls.append(job)
        if self.spawn_child:
            child = await asyncio.create_subprocess_exec("sleep", "60")
            (job.path / "child.pid").write_text(str(child.pid))
        for step in range(1, self.steps + 1):
            await asyncio.sleep(self.seconds / self.steps)
            p = Progress(phase="train", step=step, total_steps=self.steps, reward=0.1 * step, loss=1.0 / step)
            await progress(p)
        if self.error is not None:
            raise self.error
        if self.result is not None:
            return msgspec.structs.replace(self.result, job_id=job.job_id)
        if self.failure is not None:
            return JobResult(job_id=job.job_id, ok=False, failure=self.failure, detail="fake failure")
        return JobResult(
            job_id=job.job_id,
            ok=True,
            pre=self.pre,
            post=self.post,
            train_seconds=self.seconds,
            timings={"train": 0.0},
            sampling="fake: fixed scores, no model",
        )


def make_trainer(options: Mapping[str, str]) -> FakeInnerTrainer:
    failure = options.get("failure") or None
    return FakeInnerTrainer(
        seconds=float(options.get("seconds", 0.0)),
        steps=int(options.get("steps", 2)),
        failure=failure,  # type: ignore[arg-type]
        spawn_child=options.get("spawn_child", "") == "1",
    )


class OneSlowJob(FakeInnerTrainer):
    """Job ``slow`` trains for a minute (a test that waits for it times out: only a cancel ends it in time); every
    other job at once. ``finished``: the jobs whose run returned a result, in order."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.finished: list[str] = []

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        self.seconds, self.steps = (60.0, 600) if job.job_id == self.slow else (0.0, 2)
        result = await super().run(job, progress)
        self.finished.append(job.job_id)
        return result


class EvalScoringTrainer:
    """Trains (sleeps), then scores on the hidden eval package its pod agent delivers, like the prime-rl runner.

    The pod agent binds ``use_eval_source``; the result's ``post`` is the package's task count / 1000 and its
    ``detail`` the package's manifest fingerprint, so a test sees exactly which package scoring used.
    """

    name = "fake-eval"

    def __init__(self, *, seconds: float = 0.2) -> None:
        self.seconds = seconds
        self.eval_source: Callable[[JobBundle], Awaitable[Path]] | None = None
        self.package_paths: list[Path] = []

    def use_eval_source(self, source: Callable[[JobBundle], Awaitable[Path]]) -> None:
        self.eval_source = source

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        await asyncio.sleep(self.seconds)
        await progress(Progress(phase="train", step=1, total_steps=1, reward=0.5))
        if self.eval_source is None:
            return JobResult(job_id=job.job_id, ok=False, failure="scoring_error", detail="no eval source")
        try:
            path = await self.eval_source(job)
        except OSError as exc:
            return JobResult(job_id=job.job_id, ok=False, failure="scoring_error", detail=str(exc))
        self.package_paths.append(path)
        (manifest,) = path.glob("*/manifest.json")
        data = json.loads(manifest.read_text())
        return JobResult(
            job_id=job.job_id,
            ok=True,
            pre=0.0,
            post=data["tasks"] / 1000,
            detail=str(data["fingerprint"]),
            sampling="fake-eval: the package's task count / 1000, no model",
        )
