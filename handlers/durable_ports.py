"""Commit before effect at the port boundary: every call that leaves the process first awaits durability.

``Runtime.emit`` is acknowledged once the event is in the log's buffer (docs/architecture.md, "the side-effect
protocol"). What must never happen is an effect (a pod created, a job sent to a pod, a paid training step)
whose request a crash could still take back. These wrappers put the barrier in the one place every such
effect passes: each call awaits ``durable()`` (every event emitted so far is on disk) before it reaches the
real port. When nothing is pending the barrier is a comparison, so reads cost nothing extra.

Reads (``get_pod``, ``health``, ``events``) are gated too: they are replies to a pod (a poll acknowledges
what it read), and a uniform rule is one that a new call cannot forget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from handlers.ports.learner import DatumSpec, LearnerPort, StepOutcome
from handlers.ports.pod_agent import AgentEventsPage, AgentHealth, AgentJobStatus, AgentResult, JobSubmission, PodAgent
from handlers.ports.provider import PodInfo, PodSpec, Provider

__all__ = ["Barrier", "DurableAgent", "DurableLearner", "DurableProvider"]

#: ``Runtime.durable``: returns once every event emitted so far is durable
Barrier = Callable[[], Awaitable[None]]


class DurableProvider:
    """A :class:`~handlers.ports.provider.Provider` whose calls wait for durability first."""

    def __init__(self, inner: Provider, durable: Barrier) -> None:
        self.inner = inner
        self._durable = durable

    @property
    def name(self) -> str:
        return self.inner.name

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        await self._durable()
        return await self.inner.create_pod(spec, idempotency_name)

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        await self._durable()
        return await self.inner.get_pod(provider_id)

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        await self._durable()
        return await self.inner.list_pods(prefix)

    async def terminate_pod(self, provider_id: str) -> None:
        await self._durable()
        await self.inner.terminate_pod(provider_id)


class DurableAgent:
    """A :class:`~handlers.ports.pod_agent.PodAgent` whose calls wait for durability first."""

    def __init__(self, inner: PodAgent, durable: Barrier) -> None:
        self.inner = inner
        self._durable = durable

    async def health(self, url: str, token: str) -> AgentHealth:
        await self._durable()
        return await self.inner.health(url, token)

    async def submit(self, url: str, token: str, job: JobSubmission, bundle: bytes) -> AgentJobStatus:
        await self._durable()
        return await self.inner.submit(url, token, job, bundle)

    async def status(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        await self._durable()
        return await self.inner.status(url, token, job_id)

    async def events(self, url: str, token: str, job_id: str, cursor: int, wait_s: float) -> AgentEventsPage:
        await self._durable()
        return await self.inner.events(url, token, job_id, cursor, wait_s)

    async def result(self, url: str, token: str, job_id: str) -> AgentResult:
        await self._durable()
        return await self.inner.result(url, token, job_id)

    async def cancel(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        await self._durable()
        return await self.inner.cancel(url, token, job_id)

    async def send_eval(self, url: str, token: str, job_id: str, package: bytes) -> AgentJobStatus:
        await self._durable()
        return await self.inner.send_eval(url, token, job_id, package)


class DurableLearner:
    """A :class:`~handlers.ports.learner.LearnerPort` (a paid trainer) whose calls wait for durability first."""

    def __init__(self, inner: LearnerPort, durable: Barrier) -> None:
        self.inner = inner
        self._durable = durable

    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        await self._durable()
        return await self.inner.train_step(
            datums, loss_fn=loss_fn, loss_fn_config=loss_fn_config, learning_rate=learning_rate
        )

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        await self._durable()
        return await self.inner.save(name, with_state=with_state)
