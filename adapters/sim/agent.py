"""Simulated pod agents behind the real :class:`~handlers.ports.pod_agent.PodAgent` port (SIMULATED).

A job "runs" by letting virtual time pass: its true work (seconds on the reference GPU) divided by the speed
of the pod it landed on for its model. A pod that the simulated market killed stops answering, exactly as a
dead pod's agent does, so the real dispatcher finds out the way it would in production (a failed poll, then
the provider's word). Nothing is trained; every result says ``simulated``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import anyio
import msgspec

from handlers.ports.inner_trainer import JobResult
from handlers.ports.pod_agent import (
    AgentEvalRefused,
    AgentEvent,
    AgentEventsPage,
    AgentHealth,
    AgentJobConflict,
    AgentJobStatus,
    AgentJobUnknown,
    AgentNotFinished,
    AgentResult,
    AgentUnreachable,
    JobSubmission,
)

from .provider import SimPod, SimProvider

__all__ = ["SimPodAgents", "SimRun"]

#: (GPU type, GPU count, base model) -> work done per virtual second, relative to the reference GPU
SpeedOf = Callable[[str, int, str], float]


class SimRun(msgspec.Struct, kw_only=True):
    """One attempt of a job on one simulated pod."""

    job_id: str
    attempt: int
    provider_id: str
    started_s: float
    ends_s: float
    cut_s: float | None = None  # when its pod died under it


class SimPodAgents:
    """Every simulated pod's agent, addressed by the pod's ``sim://`` URL."""

    def __init__(self, provider: SimProvider, work: Mapping[str, tuple[float, str]], speed: SpeedOf) -> None:
        """``work``: job id -> (true work in reference-GPU seconds, base model)."""
        self._provider = provider
        self._work = work
        self._speed = speed
        self._runs: dict[tuple[str, str], SimRun] = {}  # (provider id, job id) -> its run there
        self.runs: list[SimRun] = []

    def _now(self) -> float:
        return anyio.current_time()

    def _pod(self, url: str) -> SimPod:
        pod = self._provider.pod_at(url)
        if pod is None or self._provider.ended_s(pod) is not None or self._now() < pod.ready_s:
            raise AgentUnreachable(f"{url}: connection refused (simulated pod not serving)")
        return pod

    def _run(self, url: str, job_id: str) -> SimRun:
        pod = self._pod(url)
        run = self._runs.get((pod.provider_id, job_id))
        if run is None:
            raise AgentJobUnknown(f"{url}: job {job_id} unknown")
        return run

    def _status(self, run: SimRun, *, created: bool = False) -> AgentJobStatus:
        done = self._now() >= run.ends_s
        return AgentJobStatus(
            job_id=run.job_id, state="succeeded" if done else "running", attempt=run.attempt, created=created
        )

    async def health(self, url: str, token: str) -> AgentHealth:
        pod = self._pod(url)
        busy = [r.job_id for (pid, _), r in self._runs.items() if pid == pod.provider_id and self._now() < r.ends_s]
        return AgentHealth(ok=True, trainer="sim", version="simulated", busy=busy[0] if busy else "")

    async def submit(self, url: str, token: str, job: JobSubmission, bundle: bytes) -> AgentJobStatus:
        pod = self._pod(url)
        known = self._runs.get((pod.provider_id, job.job_id))
        if known is not None:
            if known.attempt != job.attempt:
                raise AgentJobConflict(f"{url}: job {job.job_id} already ran here as attempt {known.attempt}")
            return self._status(known)
        work, model = self._work[job.job_id]
        now = self._now()
        speed = self._speed(pod.gpu.gpu_type, pod.gpu_count, model)
        end = now + work / speed
        run = SimRun(job_id=job.job_id, attempt=job.attempt, provider_id=pod.provider_id, started_s=now, ends_s=end)
        if pod.death_s < run.ends_s:
            run.cut_s = pod.death_s
        self._runs[(pod.provider_id, job.job_id)] = run
        self.runs.append(run)
        return self._status(run, created=True)

    async def status(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        return self._status(self._run(url, job_id))

    async def events(self, url: str, token: str, job_id: str, cursor: int, wait_s: float) -> AgentEventsPage:
        run = self._run(url, job_id)
        pod = self._provider.pod_at(url)
        assert pod is not None
        # A long poll: back when the job ends, the pod dies or the wait is over, whichever comes first.
        wake = min(run.ends_s, pod.death_s, self._now() + wait_s)
        if wake > self._now():
            await anyio.sleep(wake - self._now())
        run = self._run(url, job_id)  # raises if the pod died meanwhile
        if self._now() < run.ends_s:
            return AgentEventsPage(job_id=job_id, events=[], next_cursor=cursor, done=False)
        end = AgentEvent(seq=1, ts=run.ends_s, kind="state", state="succeeded")
        return AgentEventsPage(job_id=job_id, events=[end] if cursor < 1 else [], next_cursor=1, done=True)

    async def result(self, url: str, token: str, job_id: str) -> AgentResult:
        run = self._run(url, job_id)
        if self._now() < run.ends_s:
            raise AgentNotFinished(f"{url}: job {job_id} still running")
        wall = run.ends_s - run.started_s
        res = JobResult(job_id=job_id, ok=True, pre=0.0, post=0.0, train_seconds=wall, detail="simulated")
        return AgentResult(job_id=job_id, attempt=run.attempt, state="succeeded", result=res, trainer="sim")

    async def cancel(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        run = self._run(url, job_id)
        run.ends_s = min(run.ends_s, self._now())
        return self._status(run)

    async def send_eval(self, url: str, token: str, job_id: str, package: bytes) -> AgentJobStatus:
        raise AgentEvalRefused(f"{url}: simulated jobs score themselves")
