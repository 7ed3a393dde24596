"""The Runpod API key as a value that cannot leak by accident.

It is revealed only inside :class:`BearerAuth`, which writes the ``Authorization`` header straight
onto the request, so no frame of this package ever holds the key in a plain local: tracebacks rendered
with locals (structlog's default Rich formatter does that) show ``ApiKey(***)`` and httpx masks the
header itself. The fingerprint identifies the key in ``run.started`` without exposing it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator

import httpx

__all__ = ["API_KEY_ENV", "ApiKey", "BearerAuth"]

#: the environment variable the key is read from (named in every auth error)
API_KEY_ENV = "RUNPOD_API_KEY"


class ApiKey:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        value = value.strip()
        if not value:
            raise ValueError(f"the Runpod API key is empty: set {API_KEY_ENV}")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def fingerprint(self) -> str:
        """A short, non-reversible id of the key (sha256 prefix)."""
        return "sha256:" + hashlib.sha256(self._value.encode()).hexdigest()[:12]

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key masked (server messages may echo a header)."""
        return text.replace(self._value, "***") if self._value in text else text

    def __repr__(self) -> str:
        return "ApiKey(***)"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[object, ...]:
        # Pickling would write the key in clear into whatever the pickle lands in.
        raise TypeError("ApiKey cannot be pickled")


class BearerAuth(httpx.Auth):
    """httpx auth that adds ``Authorization: Bearer <key>`` at send time."""

    def __init__(self, key: ApiKey) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = "Bearer " + self._key.reveal()
        yield request

    def __repr__(self) -> str:
        return "BearerAuth(***)"
