"""Runpod pods over REST v2 (``https://api.runpod.io/v2``), behind the provider port.

Public surface: :class:`RunpodProvider` (create/get/list/terminate pods, orphan reaping by run prefix,
GPU catalog with stock), :class:`RetryPolicy`, :class:`GpuOffer` / :class:`Availability`, and the
phrases used to recognise stock-outs. The API key is read from ``RUNPOD_API_KEY`` and never logged.
"""

from __future__ import annotations

from ._catalog import Availability, GpuOffer, in_stock
from ._errors import QUOTA_PHRASES, STOCK_OUT_PHRASES
from ._http import RetryPolicy, parse_retry_after
from ._provider import DEFAULT_BASE_URL, RunpodProvider
from ._secret import API_KEY_ENV, ApiKey
from ._wire import PROXY_URL, status_to_state

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "PROXY_URL",
    "QUOTA_PHRASES",
    "STOCK_OUT_PHRASES",
    "ApiKey",
    "Availability",
    "GpuOffer",
    "RetryPolicy",
    "RunpodProvider",
    "in_stock",
    "parse_retry_after",
    "status_to_state",
]
