"""One Runpod HTTP exchange with bounded retries: 429 honours ``Retry-After``, 5xx and network errors
back off exponentially with jitter.

Only requests that are safe to repeat are retried here. A create that fails ambiguously (5xx, timeout)
may have taken effect, so it surfaces as :class:`AmbiguousFailure` and the caller checks by pod name
before trying again. Sleeping and jitter come in as functions so tests run instantly and deterministically.
Nothing here sees the API key: the client's :class:`BearerAuth` adds it to each request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import httpx
import msgspec
import structlog

from adapters.retry import RetryPolicy, parse_retry_after
from handlers.ports.provider import ProviderUnavailable

from ._errors import error_text
from ._secret import ApiKey
from ._wire import JsonBody

__all__ = ["AmbiguousFailure", "HttpSession", "RetryPolicy", "decode", "parse_retry_after"]

log = structlog.get_logger("adapters.runpod")

Sleep = Callable[[float], Awaitable[None]]
Rand = Callable[[], float]
T = TypeVar("T")


class AmbiguousFailure(ProviderUnavailable):
    """A non-idempotent request failed in a way that does not say whether it took effect."""


class HttpSession:
    """A thin retrying wrapper around one ``httpx.AsyncClient`` pointed at the Runpod API."""

    def __init__(self, client: httpx.AsyncClient, key: ApiKey, policy: RetryPolicy, sleep: Sleep, rand: Rand) -> None:
        self._client = client
        self._key = key
        self.policy = policy
        self._sleep = sleep
        self._rand = rand

    def __repr__(self) -> str:
        return f"HttpSession(base_url={str(self._client.base_url)!r})"

    async def pause(self, attempt: int, *, reason: str, method: str, path: str) -> None:
        delay = self.policy.backoff_s(attempt, self._rand())
        log.warning("runpod.retry", method=method, path=path, reason=reason, attempt=attempt + 1, delay_s=delay)
        await self._sleep(delay)

    async def send(
        self,
        method: str,
        path: str,
        *,
        body: JsonBody | None = None,
        params: Mapping[str, str] | None = None,
        idempotent: bool,
    ) -> httpx.Response:
        """The first response that is neither 429 nor (for idempotent requests) 5xx.

        Raises :class:`ProviderUnavailable` once the policy's attempts are spent, or at once when the
        server asks to wait longer than ``max_retry_after_s``; :class:`AmbiguousFailure` on the first
        5xx / network error of a non-idempotent request.
        """
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        attempts = self.policy.max_attempts
        for attempt in range(attempts):
            last = attempt + 1 == attempts
            try:
                response = await self._client.request(
                    method, path, content=body.data if body else None, params=params, headers=headers
                )
            except httpx.TransportError as exc:
                # The cause is summarised, not chained: httpx's frames hold the request body (pod env).
                reason = self._key.redact(f"network error ({type(exc).__name__}: {exc})")
                if not idempotent:
                    raise AmbiguousFailure(f"Runpod {method} {path}: {reason}") from None
                if last:
                    raise ProviderUnavailable(f"Runpod {method} {path}: {reason} after {attempts} attempts") from None
                await self.pause(attempt, reason=reason, method=method, path=path)
                continue
            status = response.status_code
            log.debug("runpod.response", method=method, path=path, status=status, attempt=attempt + 1)
            if status == 429:
                await self._wait_rate_limited(response, attempt, last, method, path)
                continue
            if status >= 500:
                detail = error_text(response, self._key)
                message = f"Runpod {method} {path}: HTTP {status}: {detail or response.reason_phrase}"
                if not idempotent:
                    raise AmbiguousFailure(message, status=status)
                if last:
                    raise ProviderUnavailable(f"{message} (after {attempts} attempts)", status=status)
                await self.pause(attempt, reason=f"HTTP {status}", method=method, path=path)
                continue
            return response
        raise AssertionError("unreachable: the last attempt always returns or raises")  # pragma: no cover

    async def _wait_rate_limited(
        self, response: httpx.Response, attempt: int, last: bool, method: str, path: str
    ) -> None:
        retry_after = parse_retry_after(response)
        where = f"Runpod {method} {path}: HTTP 429 rate limited"
        if retry_after is not None and retry_after > self.policy.max_retry_after_s:
            raise ProviderUnavailable(
                f"{where}; Retry-After {retry_after:g}s exceeds the {self.policy.max_retry_after_s:g}s cap",
                status=429,
                retry_after_s=retry_after,
            )
        if last:
            raise ProviderUnavailable(
                f"{where} (after {self.policy.max_attempts} attempts)", status=429, retry_after_s=retry_after
            )
        if retry_after is None:
            await self.pause(attempt, reason="HTTP 429", method=method, path=path)
            return
        log.warning(
            "runpod.retry",
            method=method,
            path=path,
            reason="HTTP 429",
            attempt=attempt + 1,
            delay_s=retry_after,
            retry_after=True,
        )
        await self._sleep(retry_after)


def decode(response: httpx.Response, type_: type[T]) -> T:
    """Decode a JSON success body into ``type_`` with a message that names the endpoint on failure."""
    try:
        return msgspec.json.decode(response.content, type=type_)
    except msgspec.DecodeError as exc:
        raise ProviderUnavailable(
            f"Runpod {response.request.method} {response.request.url.path}: unexpected response body ({exc})",
            status=response.status_code,
        ) from None
