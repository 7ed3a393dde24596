"""The controller's side of the pod-agent protocol: :class:`HttpPodAgent`, an async httpx client.

One client serves every pod (the URL and token are per call). Failures map onto the port's errors:
transport errors, timeouts, 5xx and proxy errors (Runpod's 524) are :class:`AgentUnreachable` (the caller
decides whether the pod is dead); 401 is :class:`AgentAuthError`; 404, 409 name the job's problem. The token
travels only in the ``Authorization`` header and is never logged or put in an error message. Query
parameters are encoded through the API's description (:mod:`.api`), the one the agent parses them with.
"""

from __future__ import annotations

import hashlib
from types import TracebackType
from typing import Any, TypeVar

import httpx
import msgspec

from adapters.pod import api
from handlers.ports.pod_agent import (
    AgentAuthError,
    AgentBusy,
    AgentError,
    AgentEvalRefused,
    AgentEventsPage,
    AgentHealth,
    AgentJobConflict,
    AgentJobStatus,
    AgentJobUnknown,
    AgentNotFinished,
    AgentNotReady,
    AgentResult,
    AgentUnreachable,
    JobSubmission,
)

__all__ = ["HttpPodAgent"]

T = TypeVar("T")


class _ErrorBody(msgspec.Struct):
    error: str = ""
    detail: str = ""


class HttpPodAgent:
    """Use as ``async with HttpPodAgent() as agent:``; implements :class:`handlers.ports.pod_agent.PodAgent`."""

    def __init__(self, *, transport: httpx.AsyncBaseTransport | None = None, timeout_s: float = 30.0) -> None:
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout_s, connect=5.0))

    async def __aenter__(self) -> HttpPodAgent:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(
        self,
        method: str,
        url: str,
        token: str,
        path: str,
        typ: type[T],
        *,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
        read_timeout_s: float | None = None,
    ) -> T:
        headers = {"Authorization": f"Bearer {token}"}
        if content is not None:
            headers["Content-Type"] = "application/x-tar"
        timeout = httpx.Timeout(read_timeout_s or self._timeout_s, connect=5.0)
        target = url.rstrip("/") + path
        try:
            resp = await self._client.request(
                method, target, headers=headers, params=params, content=content, timeout=timeout
            )
        except httpx.TransportError as exc:
            raise AgentUnreachable(f"{method} {target}: {type(exc).__name__}: {exc}") from None
        if resp.status_code in (200, 201):
            try:
                return msgspec.json.decode(resp.content, type=typ)
            except msgspec.ValidationError as exc:
                raise AgentError(f"{method} {target}: unexpected answer: {exc}") from None
        body = _decode_error(resp.content)
        what = f"{method} {target}: {resp.status_code} {body.error or resp.reason_phrase}: {body.detail}"
        if resp.status_code == 401:
            raise AgentAuthError(f"{what} (the pod's bearer token was refused)")
        if resp.status_code == 404:
            raise AgentJobUnknown(what)
        if resp.status_code == 409:
            if body.error == "busy":
                raise AgentBusy(what)
            if body.error == "not_finished":
                raise AgentNotFinished(what)
            if body.error == "eval_refused":
                raise AgentEvalRefused(what)
            if body.error == "not_ready":
                raise AgentNotReady(what)
            raise AgentJobConflict(what)
        if resp.status_code >= 500 or resp.status_code == 429:
            raise AgentUnreachable(what)
        raise AgentError(what)

    async def health(self, url: str, token: str) -> AgentHealth:
        return await self._call("GET", url, token, "/health", AgentHealth, read_timeout_s=10.0)

    async def submit(self, url: str, token: str, job: JobSubmission, bundle: bytes) -> AgentJobStatus:
        """Submit ``bundle``; its parameters are checked against the API's description (:mod:`.api`) first."""
        params = _params(
            "submit",
            {
                "family": job.family,
                "attempt": job.attempt,
                "time_budget_s": job.time_budget_s,
                "sha256": job.bundle_sha256,
            },
        )
        path = f"/jobs/{job.job_id}"
        return await self._call("POST", url, token, path, AgentJobStatus, params=params, content=bundle)

    async def status(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        return await self._call("GET", url, token, f"/jobs/{job_id}", AgentJobStatus)

    async def events(self, url: str, token: str, job_id: str, cursor: int, wait_s: float) -> AgentEventsPage:
        return await self._call(
            "GET",
            url,
            token,
            f"/jobs/{job_id}/events",
            AgentEventsPage,
            params=_params("events", {"cursor": cursor, "wait": min(max(wait_s, 0.0), api.MAX_WAIT_S)}),
            read_timeout_s=wait_s + 15.0,
        )

    async def result(self, url: str, token: str, job_id: str) -> AgentResult:
        return await self._call("GET", url, token, f"/jobs/{job_id}/result", AgentResult)

    async def cancel(self, url: str, token: str, job_id: str) -> AgentJobStatus:
        return await self._call("POST", url, token, f"/jobs/{job_id}/cancel", AgentJobStatus)

    async def send_eval(self, url: str, token: str, job_id: str, package: bytes) -> AgentJobStatus:
        params = _params("eval", {"sha256": hashlib.sha256(package).hexdigest()})
        path = f"/jobs/{job_id}/eval"
        return await self._call("POST", url, token, path, AgentJobStatus, params=params, content=package)


def _params(op: str, values: dict[str, Any]) -> dict[str, str]:
    """The query of ``op``, checked against the API's description before anything is sent: a value the agent
    would refuse with 400 is the same :class:`AgentError` here, without the round trip."""
    try:
        return api.encode_params(op, values)
    except ValueError as exc:
        raise AgentError(str(exc)) from None


def _decode_error(content: bytes) -> _ErrorBody:
    try:
        return msgspec.json.decode(content, type=_ErrorBody)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _ErrorBody(detail=content[:200].decode("utf-8", "replace"))
