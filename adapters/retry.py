"""Bounded retries for HTTP APIs: how long to back off, and what a ``Retry-After`` header asks for.

Shared by every HTTP adapter (Runpod, OpenAI-compatible agents). Jitter comes in as a uniform draw so
tests are deterministic; the caller owns sleeping.
"""

from __future__ import annotations

import email.utils

import httpx
import msgspec

__all__ = ["RetryPolicy", "parse_retry_after"]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How hard to try before giving up with :class:`ProviderUnavailable`."""

    max_attempts: int = 5  # tries per request, the first included
    base_delay_s: float = 1.0  # first backoff ceiling; doubles per attempt
    max_delay_s: float = 30.0  # backoff ceiling cap
    max_retry_after_s: float = 300.0  # a longer Retry-After is handed to the caller instead of slept

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be >= 1")
        if not 0 < self.base_delay_s <= self.max_delay_s:
            raise ValueError("RetryPolicy: need 0 < base_delay_s <= max_delay_s")
        if self.max_retry_after_s < 0:
            raise ValueError("RetryPolicy.max_retry_after_s must be >= 0")

    def backoff_s(self, attempt: int, u: float) -> float:
        """Delay after failed attempt ``attempt`` (0-based), for a uniform draw ``u`` in [0, 1).

        "Equal jitter": half the ceiling is fixed, half random, so clients that failed together spread
        out while no delay collapses to ~0 (which would turn a retry loop into a hot loop).
        """
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0**attempt)
        return ceiling * (0.5 + 0.5 * u)


def parse_retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (integer/float seconds, or an HTTP date measured against ``Date``)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN -> unusable
    # HTTP-date form: only usable relative to the server's own clock (no local wall clock in here).
    try:
        when = email.utils.parsedate_to_datetime(value)
        now = email.utils.parsedate_to_datetime(response.headers.get("Date", ""))
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - now).total_seconds())
