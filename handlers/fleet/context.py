"""What the dispatcher and its effect tasks share: the run, the ports, the config, and atomic emits.

Effects go through ports only: the compute :class:`~handlers.ports.provider.Provider`, the
:class:`~handlers.ports.pod_agent.PodAgent`, the :class:`~handlers.budget.rules.BudgetGate` and the blob store.
(The provider port module depends on nothing but msgspec; it is imported from ``handlers.ports.provider``,
where the provider helper defined it.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from engine.blobs import BlobStore
from engine.clock import Clock
from events import EventBody, Recorded
from handlers.budget.rules import BudgetGate, BudgetProjection, BudgetState
from handlers.fleet.policy import FleetConfig
from handlers.fleet.projection import FleetProjection, FleetState
from handlers.fleet.queue import QueueProjection, QueueState
from handlers.ports.pod_agent import PodAgent
from handlers.ports.provider import PodSpec, Provider, pod_name

if TYPE_CHECKING:
    from engine.runtime import Runtime

__all__ = ["DispatchContext", "EvalPackages", "Ports", "SpecFactory"]

log = structlog.get_logger("handlers.fleet.dispatcher")

#: (GPU type, pod id, the pod's bearer token) -> what to launch
SpecFactory = Callable[[str, str, str], PodSpec]
#: family -> its hidden eval package (a tar), built under the engine's installation key
EvalPackages = Callable[[str], Awaitable[bytes]]


@dataclass
class Ports:
    provider: Provider
    agent: PodAgent
    gate: BudgetGate
    blobs: BlobStore
    tokens: Callable[[str], str]  # pod id -> the pod agent's bearer token
    spec_for: SpecFactory
    #: sent to a job once its training has ended (``eval_needed``); None: such a job's scoring cannot start
    eval_packages: EvalPackages | None = None


@dataclass
class DispatchContext:
    runtime: Runtime
    ports: Ports
    config: FleetConfig
    clock: Clock
    #: a provision failure no retry will fix ("auth: ..."): no more launches
    blocked: str = ""
    #: pod id -> the clock's time of its agent's last good answer
    last_ok: dict[str, float] = field(default_factory=dict)
    #: pod id -> when its health checks started failing (cleared by a good answer)
    unreachable_since: dict[str, float] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.runtime.run_id

    def now(self) -> float:
        return self.clock.now()

    def queue(self) -> QueueState:
        return self.runtime.state(QueueProjection)

    def fleet(self) -> FleetState:
        return self.runtime.state(FleetProjection)

    def budget(self) -> BudgetState:
        return self.runtime.state(BudgetProjection)

    def pod_name(self, pod_id: str) -> str:
        return pod_name(self.run_id, pod_id)

    def token(self, pod_id: str) -> str:
        return self.ports.tokens(pod_id)

    async def emit(self, body: EventBody) -> Recorded:
        return await self.runtime.emit(body)

    async def emit_if(self, decide: Callable[[], EventBody | None]) -> Recorded | None:
        """Decide from the projections and emit, with no await in between: the decision is atomic."""
        body = decide()
        if body is None:
            return None
        return await self.runtime.emit(body)
