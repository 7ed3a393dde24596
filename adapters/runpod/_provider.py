"""The Runpod implementation of the :class:`~handlers.ports.provider.Provider` port (REST v2, async httpx).

REST v2 places exactly one GPU type per create and never falls back, so ladder walking stays with the
dispatcher: a capacity refusal surfaces as :class:`StockOut` and the caller tries the next rung.
Creates are idempotent by pod name: an existing pod with the requested name is returned instead of a
second one being launched, which is what makes a resumed run's retried ``pod.requested`` safe.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import quote

import anyio
import httpx
import msgspec
import structlog

from handlers.ports.provider import PodInfo, PodSpec, PodState, ProviderAuthError, ProviderUnavailable, find_orphans

from ._catalog import GpuOffer, WireGpuList, WireGpuType, offer
from ._errors import error_for
from ._http import AmbiguousFailure, HttpSession, Rand, RetryPolicy, Sleep, decode
from ._secret import API_KEY_ENV, ApiKey, BearerAuth
from ._wire import WirePod, WirePodList, build_create_body, pod_info

__all__ = ["DEFAULT_BASE_URL", "RunpodProvider"]

log = structlog.get_logger("adapters.runpod")

DEFAULT_BASE_URL = "https://api.runpod.io"
_PODS = "/v2/pods"


class _WireBillingRecord(msgspec.Struct, rename="camel"):
    total_amount: float


class _WireBilling(msgspec.Struct):
    records: list[_WireBillingRecord]


class RunpodProvider:
    """Pods on Runpod. Use as ``async with RunpodProvider.from_env() as provider: ...``."""

    name: ClassVar[str] = "runpod"

    def __init__(
        self,
        api_key: str | ApiKey,
        *,
        base_url: str = DEFAULT_BASE_URL,
        transport: httpx.AsyncBaseTransport | None = None,
        policy: RetryPolicy | None = None,
        sleep: Sleep = anyio.sleep,
        rand: Rand = random.random,  # jitter source; tests inject a fixed one
        timeout_s: float = 30.0,
    ) -> None:
        self._key = api_key if isinstance(api_key, ApiKey) else ApiKey(api_key)
        del api_key  # from here on only the masked ApiKey is in scope (tracebacks render locals)
        self._client = httpx.AsyncClient(
            base_url=base_url, transport=transport, timeout=timeout_s, auth=BearerAuth(self._key)
        )
        self._http = HttpSession(self._client, self._key, policy or RetryPolicy(), sleep, rand)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> RunpodProvider:
        """A provider keyed by ``RUNPOD_API_KEY``; a clear :class:`ProviderAuthError` when it is unset."""
        value = (os.environ if environ is None else environ).get(API_KEY_ENV, "").strip()
        del environ  # neither the environment (other secrets) nor the key stays in this frame's locals
        key = ApiKey(value) if value else None
        del value
        if key is None:
            raise ProviderAuthError(f"{API_KEY_ENV} is not set: export your Runpod API key to use --provider runpod")
        return cls(key, **kwargs)

    @property
    def key_fingerprint(self) -> str:
        return self._key.fingerprint()

    def __repr__(self) -> str:
        return f"RunpodProvider(base_url={str(self._client.base_url)!r}, key={self._key!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> RunpodProvider:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ---- the Provider port ------------------------------------------------------------------------

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        body = build_create_body(spec, idempotency_name)  # local checks raise before any request
        existing = await self._find_by_name(idempotency_name)
        if existing is not None:
            log.info("runpod.create_reused", name=idempotency_name, pod=existing.provider_id)
            return existing
        policy = self._http.policy
        for attempt in range(policy.max_attempts):
            try:
                response = await self._http.send("POST", _PODS, body=body, idempotent=False)
            except AmbiguousFailure as exc:
                if attempt + 1 == policy.max_attempts:
                    raise ProviderUnavailable(
                        f"{exc} (create of {idempotency_name} failed {policy.max_attempts} times)",
                        status=exc.status,
                    ) from exc
                await self._http.pause(attempt, reason=str(exc), method="POST", path=_PODS)
                # The failed create may have gone through: adopt that pod rather than launch a twin.
                existing = await self._find_by_name(idempotency_name)
                if existing is not None:
                    log.info("runpod.create_recovered", name=idempotency_name, pod=existing.provider_id)
                    return existing
                continue
            if response.status_code in (200, 201):
                info = pod_info(decode(response, WirePod))
                log.info(
                    "runpod.created",
                    name=info.name,
                    pod=info.provider_id,
                    gpu=info.gpu_type,
                    usd_per_hour=info.usd_per_hour,
                )
                return info
            error = error_for(response, self._key, operation="create pod", gpu_type=spec.gpu_type)
            log.warning(
                "runpod.create_failed",
                name=idempotency_name,
                gpu=spec.gpu_type,
                kind=error.kind,
                status=response.status_code,
            )
            raise error
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        response = await self._http.send("GET", f"{_PODS}/{quote(provider_id, safe='')}", idempotent=True)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise error_for(response, self._key, operation="get pod")
        return pod_info(decode(response, WirePod))

    async def list_pods(self, prefix: str = "") -> list[PodInfo]:
        # v2 listPods has no name filter (v1 had ?name=), so the prefix is applied here.
        response = await self._http.send("GET", _PODS, idempotent=True)
        if response.status_code != 200:
            raise error_for(response, self._key, operation="list pods")
        pods = decode(response, WirePodList).pods
        return [pod_info(p) for p in pods if p.name.startswith(prefix)]

    async def terminate_pod(self, provider_id: str) -> None:
        response = await self._http.send("DELETE", f"{_PODS}/{quote(provider_id, safe='')}", idempotent=True)
        if response.status_code in (200, 204, 404):  # 404: already gone, which is what was asked
            log.info("runpod.terminated", pod=provider_id, status=response.status_code)
            return
        raise error_for(response, self._key, operation="terminate pod")

    # ---- beyond the port --------------------------------------------------------------------------

    async def find_orphans(self, run_id: str, keep: frozenset[str] = frozenset()) -> list[PodInfo]:
        """Live pods of ``run_id`` not in ``keep`` (provider ids the fleet still tracks)."""
        return await find_orphans(self, run_id, keep)

    async def reap_orphans(self, run_id: str, keep: frozenset[str] = frozenset()) -> list[PodInfo]:
        """Terminate :meth:`find_orphans`' pods; returns what was terminated."""
        orphans = await self.find_orphans(run_id, keep)
        for pod in orphans:
            log.warning("runpod.reaping_orphan", pod=pod.provider_id, name=pod.name)
            await self.terminate_pod(pod.provider_id)
        return orphans

    async def gpu_catalog(
        self, *, cloud: str = "SECURE", gpu_count: int = 1, availability: bool = True
    ) -> list[GpuOffer]:
        """GPU types with list prices and (by default) current pod stock for ``cloud`` and ``gpu_count``."""
        params = {"include": "AVAILABILITY", "product": "POD", "count": str(gpu_count), "cloud": cloud}
        response = await self._http.send(
            "GET", "/v2/catalog/gpus", params=params if availability else None, idempotent=True
        )
        if response.status_code != 200:
            raise error_for(response, self._key, operation="list GPU types")
        return [offer(g) for g in decode(response, WireGpuList).gpus]

    async def gpu_offer(self, gpu_type: str, *, cloud: str = "SECURE", gpu_count: int = 1) -> GpuOffer | None:
        """One GPU type with price and stock, or None if Runpod does not know the id."""
        params = {"include": "AVAILABILITY", "product": "POD", "count": str(gpu_count), "cloud": cloud}
        path = f"/v2/catalog/gpus/{quote(gpu_type, safe='')}"
        response = await self._http.send("GET", path, params=params, idempotent=True)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise error_for(response, self._key, operation="get GPU type")
        return offer(decode(response, WireGpuType))

    async def recent_spend(self, *, days: int = 1) -> float:
        """USD spent over the last ``days`` daily buckets (``GET /v2/billing``); also proves the key works.

        REST v2 exposes no spend limit; the account's limit is set and shown in the Runpod console."""
        params = {"bucketSize": "day", "lastN": str(days)}
        response = await self._http.send("GET", "/v2/billing", params=params, idempotent=True)
        if response.status_code != 200:
            raise error_for(response, self._key, operation="read billing")
        return sum(r.total_amount for r in decode(response, _WireBilling).records)

    async def _find_by_name(self, name: str) -> PodInfo | None:
        matches = [p for p in await self.list_pods(name) if p.name == name and p.state is not PodState.GONE]
        if len(matches) > 1:
            log.warning("runpod.duplicate_name", name=name, pods=[p.provider_id for p in matches])
        return matches[0] if matches else None
