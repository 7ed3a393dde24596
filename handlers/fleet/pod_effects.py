"""The dispatcher's pod effects: launch a pod until its agent answers, terminate one, check one's health.

Each is an effect task for one request already durable in the log (``pod.requested`` / ``pod.terminating``),
so a resumed run starts the same task for every request left without an outcome. Launching is idempotent by
the pod's name (``ait-<run>-<pod>``): a retried create returns the pod that a crashed process had created.

A pod is ready once its agent answers *and* its self-check has passed; the check's result is recorded
(``pod.self_checked``) when the agent ran one. A failed check fails the launch (kind ``self_check``, naming
what failed); unless only the GPU check failed (a bad host), every pod would fail it the same way (the image
or the installs are wrong), so no further pod is launched.
"""

from __future__ import annotations

import functools

import anyio
import msgspec
import structlog

from events import PodCheck, PodCreated, PodLost, PodProvisionFailed, PodReady, PodSelfChecked, PodTerminated
from handlers.fleet.context import DispatchContext
from handlers.fleet.policy import FATAL_PROVISION_KINDS
from handlers.fleet.projection import BOOTING, LIVE, PodEntry
from handlers.ports.pod_agent import AgentError, SelfCheck
from handlers.ports.provider import PodInfo, PodState, ProviderUnavailable, ProvisionError

__all__ = ["check_health", "lose_pod", "pod_dead", "provision", "terminate"]

log = structlog.get_logger("handlers.fleet.dispatcher")

_DEAD = (PodState.FAILED, PodState.GONE, PodState.STOPPED)


async def lose_pod(ctx: DispatchContext, pod_id: str, reason: str) -> None:
    """Record that a live pod died or stopped answering (nothing if it is already lost or ending)."""

    def decide() -> PodLost | None:
        pod = ctx.fleet().pods.get(pod_id)
        return PodLost(pod_id=pod_id, reason=reason) if pod is not None and pod.status in LIVE else None

    if await ctx.emit_if(decide) is not None:
        log.warning("pod.lost", pod_id=pod_id, reason=reason)


async def pod_dead(ctx: DispatchContext, pod: PodEntry, unreachable_since: float | None) -> str | None:
    """Why the pod whose agent did not answer counts as dead, or None if it may come back."""
    try:
        info = await ctx.ports.provider.get_pod(pod.provider_id) if pod.provider_id else None
    except ProvisionError as exc:  # the provider cannot tell now: judge by the grace period alone
        log.info("pod.status_unknown", pod_id=pod.pod_id, error=str(exc))
        info = PodInfo(provider_id=pod.provider_id, name="", state=PodState.UNKNOWN)
    if info is None:
        return "the provider no longer knows the pod"
    if info.state in _DEAD:
        return f"the provider reports it {info.state.value} ({info.raw_status or 'no status'})"
    if unreachable_since is not None and ctx.now() - unreachable_since >= ctx.config.agent_grace_s:
        return f"its agent did not answer for {ctx.config.agent_grace_s:g} s"
    return None


async def _failed(ctx: DispatchContext, pod: PodEntry, kind: str, detail: str, provider_id: str = "") -> None:
    def decide() -> PodProvisionFailed | None:
        now = ctx.fleet().pods.get(pod.pod_id)
        if now is None or now.status not in BOOTING:
            return None
        return PodProvisionFailed(
            key=pod.key,
            pod_id=pod.pod_id,
            kind=kind,
            detail=detail[:500],
            gpu_type=pod.gpu_type,
            provider_id=provider_id or now.provider_id,
        )

    await ctx.emit_if(decide)
    if kind in FATAL_PROVISION_KINDS:
        ctx.blocked = f"{kind}: {detail}"
    log.warning("pod.provision_failed", pod_id=pod.pod_id, gpu_type=pod.gpu_type, kind=kind, detail=detail[:200])


async def _get(ctx: DispatchContext, provider_id: str) -> PodInfo | None:
    try:
        return await ctx.ports.provider.get_pod(provider_id)
    except ProviderUnavailable as exc:
        log.info("pod.get_retry", provider_id=provider_id, error=str(exc))
        return PodInfo(provider_id=provider_id, name="", state=PodState.UNKNOWN)


def _ready(ctx: DispatchContext, pod: PodEntry, info: PodInfo) -> PodReady | None:
    now = ctx.fleet().pods.get(pod.pod_id)
    if now is None or now.status not in BOOTING:
        return None
    return PodReady(
        key=pod.key,
        pod_id=pod.pod_id,
        provider_id=info.provider_id,
        url=info.url,
        gpu_type=info.gpu_type or pod.gpu_type,
        usd_per_hour=info.usd_per_hour,
    )


def _self_checked(ctx: DispatchContext, pod: PodEntry, check: SelfCheck) -> PodSelfChecked | None:
    now = ctx.fleet().pods.get(pod.pod_id)
    if now is None or now.status not in BOOTING or now.self_check:
        return None
    return PodSelfChecked(
        pod_id=pod.pod_id,
        ok=check.state == "passed",
        checks=[PodCheck(name=i.name, ok=i.ok, detail=i.detail[:300]) for i in check.items],
        duration_s=check.duration_s,
    )


async def _checked(ctx: DispatchContext, pod: PodEntry, check: SelfCheck, provider_id: str) -> bool:
    """Record a finished self-check; False (and the launch failed) when it did not pass."""
    if check.items:
        await ctx.emit_if(functools.partial(_self_checked, ctx, pod, check))
    if check.state == "passed":
        return True
    failed = {i.name for i in check.failed()}
    await _failed(ctx, pod, "self_check", f"self-check failed: {check.summary()}", provider_id)
    if failed - {"gpu"} and not ctx.blocked:
        ctx.blocked = f"self_check: {check.summary()} (every pod of this image would fail it the same way)"
    return False


async def provision(ctx: DispatchContext, pod_id: str) -> None:
    """Drive a requested pod to ``pod.ready`` or ``pod.provision_failed``."""
    pod = ctx.fleet().pods[pod_id]
    token = ctx.token(pod_id)
    info = await _get(ctx, pod.provider_id) if pod.provider_id else None
    if info is None:  # never created (or the provider forgot it): create, idempotent by name
        try:
            spec = ctx.ports.spec_for(pod.gpu_type, pod_id, token)
            if spec.gpu_count != pod.gpu_count:  # the rung says how many GPUs; the factory says what runs
                spec = msgspec.structs.replace(spec, gpu_count=pod.gpu_count)
            info = await ctx.ports.provider.create_pod(spec, ctx.pod_name(pod_id))
        except ProvisionError as exc:
            await _failed(ctx, pod, exc.kind, str(exc))
            return
        log.info("pod.created", pod_id=pod_id, provider_id=info.provider_id, gpu_type=pod.gpu_type)
    provider_id, rate = info.provider_id, info.usd_per_hour

    def created() -> PodCreated | None:
        now = ctx.fleet().pods.get(pod_id)
        if now is None or now.status != "requested":
            return None
        return PodCreated(pod_id=pod_id, provider_id=provider_id, usd_per_hour=rate)

    await ctx.emit_if(created)
    deadline = pod.requested_ts + ctx.config.ready_timeout_s
    delay = 0.05
    while True:
        if info.state in _DEAD:
            await _failed(ctx, pod, "bootstrap", f"pod {info.state.value} before its agent answered", provider_id)
            return
        if info.url and info.state is PodState.RUNNING:
            try:
                check = (await ctx.ports.agent.health(info.url, token)).self_check
            except AgentError as exc:
                log.debug("pod.not_ready", pod_id=pod_id, error=str(exc))
            else:
                if check.state == "pending":  # the agent answers; its self-check still runs
                    log.debug("pod.self_check_pending", pod_id=pod_id)
                elif not await _checked(ctx, pod, check, provider_id):
                    return
                else:
                    await ctx.emit_if(functools.partial(_ready, ctx, pod, info))
                    ctx.last_ok[pod_id] = ctx.now()
                    log.info("pod.ready", pod_id=pod_id, url=info.url)
                    return
        if ctx.now() > deadline:
            what = f"its agent was not healthy within {ctx.config.ready_timeout_s:g} s"
            await _failed(ctx, pod, "bootstrap", what, provider_id)
            return
        await anyio.sleep(delay)
        delay = min(delay * 1.5, 5.0)
        info = await _get(ctx, provider_id) or PodInfo(provider_id=provider_id, name="", state=PodState.GONE)


async def terminate(ctx: DispatchContext, pod_id: str) -> bool:
    """Terminate a pod at the provider and record it; False when the provider could not be reached."""
    pod = ctx.fleet().pods[pod_id]
    ids = [pod.provider_id] if pod.provider_id else []
    try:
        if not ids:  # a request whose create outcome we never saw: find it by name
            name = ctx.pod_name(pod_id)
            ids = [p.provider_id for p in await ctx.ports.provider.list_pods(name) if p.name == name]
        for provider_id in ids:
            await ctx.ports.provider.terminate_pod(provider_id)
    except ProvisionError as exc:
        log.warning("pod.terminate_failed", pod_id=pod_id, error=str(exc))
        return False

    def decide() -> PodTerminated | None:
        now = ctx.fleet().pods.get(pod_id)
        if now is None or now.status != "terminating":
            return None
        return PodTerminated(key=now.terminate_key, pod_id=pod_id, reason=now.reason)

    await ctx.emit_if(decide)
    ctx.last_ok.pop(pod_id, None)
    log.info("pod.terminated", pod_id=pod_id, reason=pod.reason)
    return True


async def check_health(ctx: DispatchContext, pod_id: str) -> None:
    """One health check of an available pod; a dead one is recorded lost."""
    pod = ctx.fleet().pods[pod_id]
    try:
        await ctx.ports.agent.health(pod.url, ctx.token(pod_id))
    except AgentError as exc:
        # A single failed check is not a death: lost when the provider says so, or after agent_grace_s of failures.
        since = ctx.unreachable_since.setdefault(pod_id, ctx.now())
        reason = await pod_dead(ctx, pod, since)
        if reason is not None:
            await lose_pod(ctx, pod_id, f"{reason}: {exc}"[:300])
        return
    ctx.unreachable_since.pop(pod_id, None)
    ctx.last_ok[pod_id] = ctx.now()
