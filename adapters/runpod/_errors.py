"""Turning a Runpod error response into the provider port's :class:`ProvisionError` hierarchy.

Runpod v2 errors are RFC 9457 problem documents ``{title, status, detail, errors?}``; v1 used
``{"error": ...}`` or ``{"message": ...}``; proxies answer with raw text. Capacity exhaustion has no
machine-readable code (the spec says so under ``createPod``): it arrives as a 400 whose human-readable
``detail`` says so, which is why stock-outs are recognised by phrase.
"""

from __future__ import annotations

import httpx
import msgspec

from handlers.ports.provider import (
    InvalidPodRequest,
    ProviderAuthError,
    ProviderUnavailable,
    ProvisionError,
    QuotaExceeded,
    StockOut,
)

from ._secret import API_KEY_ENV, ApiKey

__all__ = ["QUOTA_PHRASES", "STOCK_OUT_PHRASES", "error_for", "error_text"]

#: Lower-case fragments of Runpod's out-of-capacity messages. Sources (shared notes, section 3):
#: "There are no longer any instances available with the requested specifications. Please refresh and
#: try again." (and its "...with enough disk space." / "...Please try again later." variants; runpodctl
#: itself falls over on the first fragment), "There are not enough free GPUs on the host machine to
#: start this pod." (start/resume), and the v2 spec's wording for a 400 on create: "this GPU and data
#: center combination could not be placed" / "no capacity".
STOCK_OUT_PHRASES: tuple[str, ...] = (
    "no longer any instances available",
    "not enough free gpus",
    "could not be placed",
    "no capacity",
    "out of capacity",
)

#: Fragments of spend-limit / balance refusals (the v2 spec documents 402 = insufficient balance).
QUOTA_PHRASES: tuple[str, ...] = ("insufficient balance", "spend limit", "spending limit")

_MAX_DETAIL = 300  # keep exception text readable; the full body is never needed to act on an error


class _Problem(msgspec.Struct):
    title: str = ""
    detail: str = ""
    errors: list[str] = []
    # v1 / legacy shapes
    error: str = ""
    message: str = ""


def error_text(response: httpx.Response, key: ApiKey) -> str:
    """The most useful human-readable text of an error response, key-redacted and shortened."""
    raw = response.content
    text = ""
    try:
        problem = msgspec.json.decode(raw, type=_Problem)
    except msgspec.DecodeError:
        text = raw.decode("utf-8", errors="replace").strip()
    else:
        text = problem.detail or problem.message or problem.error or problem.title
        if problem.errors:
            text = f"{text} ({'; '.join(problem.errors)})" if text else "; ".join(problem.errors)
    text = key.redact(" ".join(text.split()))
    return text[:_MAX_DETAIL] + ("…" if len(text) > _MAX_DETAIL else "")


def error_for(response: httpx.Response, key: ApiKey, *, operation: str, gpu_type: str = "") -> ProvisionError:
    """The exception for a non-success response (not raised here, so callers choose the traceback)."""
    status = response.status_code
    detail = error_text(response, key)
    lowered = detail.lower()
    where = f"Runpod {operation}: HTTP {status}"
    if status == 401:
        return ProviderAuthError(
            f"{where}: the API key was rejected ({detail or 'unauthorized'}); check {API_KEY_ENV}",
            status=status,
        )
    if status == 403:
        return ProviderAuthError(
            f"{where}: the API key in {API_KEY_ENV} lacks access to this resource or GPU pool "
            f"({detail or 'forbidden'}); use a key with read/write pod permission",
            status=status,
        )
    if any(p in lowered for p in STOCK_OUT_PHRASES):
        target = gpu_type or "the requested GPU"
        return StockOut(f"{where}: out of stock for {target}: {detail}", gpu_type=gpu_type, status=status)
    if status == 402 or any(p in lowered for p in QUOTA_PHRASES):
        return QuotaExceeded(f"{where}: spend limit or balance exhausted: {detail}", status=status)
    if status == 429 or status >= 500:
        return ProviderUnavailable(f"{where}: {detail or 'service unavailable'}", status=status)
    return InvalidPodRequest(f"{where}: request rejected: {detail or response.reason_phrase}", status=status)
