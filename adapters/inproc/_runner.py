"""Running many in-process rollouts of one env concurrently: groups of repeats per task, bounded concurrency.

``async with InprocRunner(env, policy, settings) as runner: results = await runner.run(tasks, group_size=8)``
starts the env's shared (taskset-scoped) toolsets once, runs every (task, repeat) as its own asyncio
task (a batching policy sees them as concurrent requests and can answer them in one forward pass), and
returns the results in (task, repeat) order. Rollout errors are on each result; an env the in-process
path cannot run (a reward that needs a runtime) raises :class:`EnvLoadError` before any rollout starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import msgspec
import structlog

from adapters.openai_server import Policy

from ._loader import EnvLoadError, InprocEnv
from ._rollout import RolloutResult, RolloutSettings, rollout
from ._tools import InprocToolset

__all__ = ["InprocRunner"]

log = structlog.get_logger(__name__)


class InprocRunner:
    """Rollouts of ``env``'s tasks against ``policy``, sharing one set of taskset-scoped toolsets."""

    def __init__(self, env: InprocEnv, policy: Policy, settings: RolloutSettings | None = None) -> None:
        self.env = env
        self.policy = policy
        self.settings = settings or RolloutSettings()
        self._stack: AsyncExitStack | None = None
        self._shared: list[InprocToolset] = []

    async def start(self) -> None:
        if self._stack is not None:
            raise RuntimeError("runner already started")
        stack = AsyncExitStack()
        try:
            for toolset in self.env.shared_toolsets():
                server = InprocToolset(toolset)
                stack.push_async_callback(server.close)
                await server.start()
                self._shared.append(server)
        except Exception as exc:
            await stack.aclose()
            self._shared = []
            raise EnvLoadError(
                f"env {self.env.env_id!r}: starting its shared toolsets failed: {type(exc).__name__}: {exc}"
            ) from exc
        self._stack = stack

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None
            self._shared = []

    async def __aenter__(self) -> InprocRunner:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def rollout(self, task: Any, settings: RolloutSettings | None = None) -> RolloutResult:
        if self._stack is None:
            raise RuntimeError("runner not started (use `async with InprocRunner(...)`)")
        return await rollout(self.env, task, self.policy, settings or self.settings, self._shared)

    async def run(
        self,
        tasks: Sequence[Any],
        *,
        group_size: int = 1,
        concurrency: int = 256,
        settings: RolloutSettings | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[RolloutResult]:
        """Every task ``group_size`` times; results in (task, repeat) order.

        ``seeds`` (one per rollout, in result order) become each rollout's ``sampling.seed``: the requests
        of rollout ``i`` carry ``seeds[i]``, so what a seeded policy samples does not depend on the order
        in which concurrent requests happen to reach it.
        """
        if group_size < 1 or concurrency < 1:
            raise ValueError(f"group_size and concurrency must be >= 1, got {group_size} and {concurrency}")
        count = len(tasks) * group_size
        if seeds is not None and len(seeds) != count:
            raise ValueError(f"{len(seeds)} seeds for {count} rollouts")
        for task in tasks:
            self.env.check_task(task)
        base = settings or self.settings
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int, task: Any) -> RolloutResult:
            own = base
            if seeds is not None:
                own = msgspec.structs.replace(base, sampling={**base.sampling, "seed": seeds[i]})
            async with gate:
                return await self.rollout(task, own)

        jobs = [one(i, task) for i, task in enumerate(t for t in tasks for _ in range(group_size))]
        return list(await asyncio.gather(*jobs))
