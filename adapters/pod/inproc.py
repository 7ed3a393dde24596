"""In-process pod agents behind the :class:`~handlers.ports.pod_agent.PodAgent` port (no HTTP).

For the simulated provider and for tests: each pod URL gets its own :class:`~.core.AgentCore` (created on
first use) running the given trainer in this process, with the same idempotency and stream semantics as the
HTTP agent. ``kill(url)`` makes a pod stop answering, the way a dead pod does. ``self_check`` (a function of
the pod's URL) gives each pod the self-check its agent runs before it takes a job.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from handlers.ports.inner_trainer import InnerTrainer
from handlers.ports.pod_agent import (
    AgentAuthError,
    AgentEventsPage,
    AgentHealth,
    AgentJobStatus,
    AgentResult,
    AgentUnreachable,
    JobSubmission,
)

from .core import AgentCore, SelfCheckFn

__all__ = ["InProcessAgents"]


class InProcessAgents:
    def __init__(
        self,
        trainer: Callable[[], InnerTrainer],
        workdir: Path | None = None,
        *,
        token_for_url: Callable[[str], str] | None = None,
        self_check: Callable[[str], SelfCheckFn | None] | None = None,
    ) -> None:
        self._trainer = trainer
        self._self_check = self_check
        # A work directory made here is removed by close(): every simulated worker left one behind in /tmp.
        self._owned = workdir is None
        self._workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ait-inproc-agents-"))
        self._token_for_url = token_for_url
        self.cores: dict[str, AgentCore] = {}
        self.dead: set[str] = set()

    def _core(self, url: str, token: str) -> AgentCore:
        if url in self.dead:
            raise AgentUnreachable(f"{url}: connection refused (the pod is dead)")
        if self._token_for_url is not None and token != self._token_for_url(url):
            raise AgentAuthError(f"{url}: 401 unauthorized")
        core = self.cores.get(url)
        if core is None:
            name = "".join(c if c.isalnum() else "_" for c in url)
            check = self._self_check(url) if self._self_check is not None else None
            core = self.cores[url] = AgentCore(self._trainer(), self._workdir / name, self_check=check)
            core.start_self_check()
        core.touch()
        return core

    async def kill(self, url: str) -> None:
        """The pod dies: its job stops and it never answers again."""
        self.dead.add(url)
        core = self.cores.get(url)
        if core is not None:
            await core.close()

    async def close(self) -> None:
        for core in self.cores.values():
            await core.close()
        if self._owned:
            shutil.rmtree(self._workdir, ignore_errors=True)

    async def health(self, url: str, token: str) -> AgentHealth:
        return self._core(url, token).health()

    async def submit(self, url: str, token: str, job: JobSubmission, bundle: bytes) -> AgentJobStatus:
        return await self._core(url, token).submit(job, bundle)

    async def status(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        return self._core(url, token).status(job_id)

    async def events(self, url: str, token: str, job_id: str, cursor: int, wait_s: float) -> AgentEventsPage:
        page = await self._core(url, token).events(job_id, cursor, wait_s)
        if url in self.dead:  # killed while we waited
            raise AgentUnreachable(f"{url}: connection reset")
        return page

    async def result(self, url: str, token: str, job_id: str) -> AgentResult:
        return self._core(url, token).result(job_id)

    async def cancel(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        return await self._core(url, token).cancel(job_id)

    async def send_eval(self, url: str, token: str, job_id: str, package: bytes) -> AgentJobStatus:
        return await self._core(url, token).provide_eval(job_id, package)
