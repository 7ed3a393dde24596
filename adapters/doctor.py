"""Pre-flight checks of the services a run needs (``ait doctor``): is each key there, and does it work?

Every check is one or two cheap metadata calls: no pod is created, no token sampled, nothing billed. Each result
says what it checked, what a failure blocks, and what the check itself cost. Keys are read by the caller and
never appear in a result (an error from a service is reduced to its status and reason).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol

import httpx
import msgspec

from adapters.runpod import GpuOffer
from handlers.ports.provider import ProvisionError

__all__ = [
    "Check",
    "RunpodLike",
    "check_hf",
    "check_openai",
    "check_runpod",
    "check_tinker",
    "check_wandb",
    "missing",
]

Status = Literal["ok", "missing", "failed", "warning"]
FREE = "free (metadata call)"


class Check(msgspec.Struct, frozen=True, kw_only=True):
    service: str
    status: Status
    detail: str
    blocks: str = ""  # what cannot run while this is not ok
    cost: str = FREE


def missing(service: str, env: str, blocks: str) -> Check:
    return Check(service=service, status="missing", detail=f"{env} is not set", blocks=blocks, cost="none")


def _http_failure(service: str, exc: Exception, blocks: str) -> Check:
    if isinstance(exc, httpx.HTTPStatusError):
        reason = f"HTTP {exc.response.status_code} {exc.response.reason_phrase}"
        if exc.response.status_code in (401, 403):
            reason += ": the key was refused"
    else:
        reason = f"unreachable ({type(exc).__name__})"
    return Check(service=service, status="failed", detail=reason, blocks=blocks)


async def check_tinker(
    supported_models: Callable[[], Awaitable[list[tuple[str, bool, bool]]]], model: str, *, blocks: str
) -> Check:
    """Auth and model availability: the service's capability list must offer ``model`` for training."""
    try:
        models = await supported_models()
    except Exception as exc:  # the SDK raises its own hierarchy; any failure means the run cannot start
        return Check(service="tinker", status="failed", detail=f"{type(exc).__name__}: {exc}"[:200], blocks=blocks)
    trainable = {name for name, train, _ in models if train}
    if model in trainable:
        return Check(service="tinker", status="ok", detail=f"key works; {model} is trainable ({len(models)} models)")
    near = sorted(n for n in trainable if n.split("/")[-1][:5] == model.split("/")[-1][:5])[:3]
    hint = f"; similar: {', '.join(near)}" if near else ""
    return Check(
        service="tinker", status="failed", detail=f"key works, but {model} is not trainable{hint}", blocks=blocks
    )


class RunpodLike(Protocol):
    async def recent_spend(self, *, days: int = 1) -> float: ...

    async def gpu_catalog(
        self, *, cloud: str = ..., gpu_count: int = ..., availability: bool = ...
    ) -> list[GpuOffer]: ...


async def check_runpod(provider: RunpodLike, ladder: Sequence[tuple[str, int]], *, blocks: str) -> list[Check]:
    """Auth (and the last day's spend), then the stock of each ladder rung (GPU type x count)."""
    try:
        spent = await provider.recent_spend(days=1)
    except ProvisionError as exc:
        return [Check(service="runpod", status="failed", detail=str(exc)[:200], blocks=blocks)]
    checks = [
        Check(
            service="runpod",
            status="ok",
            detail=f"key works; spent ${spent:.2f} in the last day (the spend limit is shown in the Runpod console)",
        )
    ]
    for count in sorted({c for _, c in ladder}):
        try:
            offers = await provider.gpu_catalog(gpu_count=count)
        except ProvisionError as exc:
            checks.append(Check(service="runpod catalog", status="failed", detail=str(exc)[:200], blocks=blocks))
            continue
        stock = {o.gpu_type: o for o in offers}
        for gpu, n in ladder:
            if n != count:
                continue
            o = stock.get(gpu)
            level = "unknown" if o is None else (o.availability.value if o.availability else "NONE")
            price = o.usd_per_hour_secure * n if o is not None else 0.0
            ok = level in ("LOW", "MEDIUM", "HIGH")
            checks.append(
                Check(
                    service=f"runpod {n}x {gpu}",
                    status="ok" if ok else "warning",
                    detail=f"stock {level}" + (f", ${price:.2f}/h" if o is not None else ": not in the catalog"),
                    blocks="" if ok else "this rung (the fleet falls back to the next)",
                )
            )
    return checks


async def check_openai(client: httpx.AsyncClient, model: str, *, blocks: str) -> Check:
    """``GET /models`` on the agent's OpenAI-compatible endpoint: the key works and ``model`` is served."""
    try:
        response = await client.get("/models")
        response.raise_for_status()
        served = {m.get("id", "") for m in response.json().get("data", []) if isinstance(m, dict)}
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return _http_failure("agent endpoint", exc, blocks)
    if model and model not in served:
        return Check(
            service="agent endpoint", status="failed", detail=f"key works, but {model} is not served", blocks=blocks
        )
    return Check(service="agent endpoint", status="ok", detail=f"key works; {len(served)} models served")


async def check_wandb(client: httpx.AsyncClient, *, blocks: str) -> Check:
    """The W&B GraphQL ``viewer`` query: who the key belongs to."""
    try:
        response = await client.post("/graphql", json={"query": "query Viewer { viewer { username entity } }"})
        response.raise_for_status()
        viewer = (response.json().get("data") or {}).get("viewer")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return _http_failure("wandb", exc, blocks)
    if not viewer:
        return Check(service="wandb", status="failed", detail="the key was refused (no viewer)", blocks=blocks)
    return Check(service="wandb", status="ok", detail=f"key works (user {viewer.get('username', '?')})")


async def check_hf(client: httpx.AsyncClient, *, blocks: str) -> Check:
    """The Hub's ``whoami-v2``: the token works, and whether it may write (``ait publish`` pushes a repo)."""
    try:
        response = await client.get("/api/whoami-v2")
        response.raise_for_status()
        who = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        return _http_failure("hf hub", exc, blocks)
    role = (((who.get("auth") or {}).get("accessToken") or {}).get("role")) or "unknown"
    status: Status = "ok" if role in ("write", "fineGrained", "admin") else "warning"
    return Check(
        service="hf hub",
        status=status,
        detail=f"token works (user {who.get('name', '?')}, role {role})",
        blocks="" if status == "ok" else blocks,
    )
