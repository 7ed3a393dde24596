"""The dispatcher reactor: queued jobs onto pods, pods up and down, GPU time paid for before it is used.

Each pass (on every new event, and every ``tick_s``) it

0. fails the waiting jobs whose cancel was requested (``job.cancel_requested``; an active one is stopped on its
   pod by its attempt's task);
1. starts an effect task for every request without one: a requested pod (launch), a terminating pod,
   an open job attempt. That is also the whole resume path: after a crash the log holds exactly the
   requests whose outcome is missing, and a task picks each up again with its key;
2. sends lost pods to termination and ends the attempts they held (requeue, or fail after
   ``max_attempts``);
3. settles the GPU time of pods that are gone and reserves the next chunk of pods still running (a
   refused chunk drains the pod: no new job, terminated when idle);
4. assigns waiting jobs to available pods (``[fleet] order``: the longest job first by default, onto the
   fitting pod idle longest);
5. terminates pods idle past the TTL (with ``idle_policy = "batch"``, at once a free pod that no waiting job
   fits, off the warm rungs: :mod:`handlers.fleet.batch_policy`) (and, with ``upgrade_pods``, a pod beyond
   ``max_pods`` on the priciest rung as soon as it comes free, before any assignment) (or every pod once the
   queue is drained, with ``once``);
6. launches pods while work waits, up to ``max_pods``, walking the waiting job's GPU ladder (its model's own,
   or the default) past rungs out of stock (with ``upgrade_pods``, also a pod on a cheaper rung than the
   priciest live one while work waits; with ``fallback_wait_s``, a launch below the top rung waits while a
   pod on a better rung will take the work),
   reserving each pod's first chunk of GPU time before its ``pod.requested`` (a refusal is the
   ``cost.refused`` event and no pod);
7. checks the health of available pods.

Every decision reads the projections and emits with no ``await`` in between. On start it reconciles with
the provider: pods named with the run's prefix are adopted when the log knows them as live, and terminated
otherwise, so no pod is left running unseen.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.clock import Clock
from events import PodCreated, PodLost, PodRequested, PodTerminating, Recorded
from handlers.budget.prices import PriceTable
from handlers.budget.rules import BudgetRefused, charge_unreserved
from handlers.fleet.batch_policy import fallback_waits, idle_reaps
from handlers.fleet.context import DispatchContext, Ports
from handlers.fleet.job_effects import end_attempt_lost, end_cancelled, run_attempt
from handlers.fleet.pod_effects import check_health, provision, terminate
from handlers.fleet.policy import (
    FleetConfig,
    assignment,
    choose_rung,
    launch_target,
    owed_usd,
    parse_rung,
    surplus_pod,
    upgrade_launch,
)
from handlers.fleet.projection import AVAILABLE, BOOTING, LIVE, pod_of_ref, pod_ref, pods_in
from handlers.fleet.queue import ACTIVE, WAITING, QueueState, active_jobs
from handlers.ports.provider import PodState, ProviderAuthError, ProvisionError, parse_pod_name, run_prefix

if TYPE_CHECKING:
    from engine.runtime import Runtime

__all__ = ["DispatchSummary", "Dispatcher", "DispatcherFatal"]

log = structlog.get_logger("handlers.fleet.dispatcher")

_MICRO_USD = 1e-6  # the budget's resolution: float dust below it is never charged (it would never settle)


def _count(queue: QueueState, statuses: frozenset[str]) -> int:
    return sum(queue.counts.get(s, 0) for s in statuses)


class DispatcherFatal(Exception):
    """The fleet cannot go on (e.g. the provider refused the credentials); the message says what to fix."""


class DispatchSummary(msgspec.Struct, frozen=True, kw_only=True):
    status: str  # drained | budget | blocked | stopped
    succeeded: int
    failed: int
    waiting: int
    message: str = ""


class Dispatcher:
    def __init__(
        self,
        runtime: Runtime,
        ports: Ports,
        config: FleetConfig | None = None,
        *,
        clock: Clock | None = None,
        once: bool = False,
    ) -> None:
        self.ctx = DispatchContext(runtime, ports, config or FleetConfig(), clock or runtime.clock)
        self.once = once
        self._tasks: dict[tuple[str, str], bool] = {}  # (kind, id) -> running
        self._budget_refused_at: tuple[int, ...] | None = None
        self._last_health: dict[str, float] = {}
        self._terminate_retry: dict[str, float] = {}
        self._paid_up: set[str] = set()  # gone pods whose GPU time is fully settled (skipped by billing)
        self._tg: TaskGroup | None = None

    @property
    def config(self) -> FleetConfig:
        return self.ctx.config

    # -- running -----------------------------------------------------------------------------------

    async def reactor(self, runtime: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        """For ``runtime.start_reactor(dispatcher.reactor)``."""
        await self._run(stream)

    async def run(self) -> DispatchSummary:
        """Dispatch until the queue is drained (``once``) or cancelled; returns how it ended."""
        stream = self.ctx.runtime.subscribe()
        async with stream:
            return await self._run(stream)

    async def _run(self, stream: MemoryObjectReceiveStream[Recorded]) -> DispatchSummary:
        await self.reconcile()
        outcome: DispatchSummary | DispatcherFatal
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                outcome = await self._loop(stream)
            except DispatcherFatal as exc:  # raised below, outside the task group: not wrapped in a group
                outcome = exc
            finally:
                tg.cancel_scope.cancel()
        if isinstance(outcome, DispatcherFatal):
            raise outcome
        return outcome

    async def _loop(self, stream: MemoryObjectReceiveStream[Recorded]) -> DispatchSummary:
        while True:
            await self.step()
            summary = self._finished()
            if summary is not None:
                return summary
            with anyio.move_on_after(self.config.tick_s):
                await stream.receive()
            while True:  # one pass for a burst of events
                try:
                    stream.receive_nowait()
                except anyio.WouldBlock:
                    break

    def _spawn(self, kind: str, ident: str, fn: Callable[[DispatchContext, str], Awaitable[Any]]) -> None:
        if (kind, ident) in self._tasks:
            return
        assert self._tg is not None
        self._tasks[(kind, ident)] = True

        async def wrapper() -> None:
            try:
                await fn(self.ctx, ident)
            finally:
                self._tasks.pop((kind, ident), None)

        self._tg.start_soon(wrapper, name=f"{kind}:{ident}")

    # -- one pass ----------------------------------------------------------------------------------

    def _check_fatal(self) -> None:
        if self.ctx.blocked.startswith("auth"):
            raise DispatcherFatal(f"the provider refused the credentials: {self.ctx.blocked}")

    async def step(self) -> None:
        self._check_fatal()
        ctx = self.ctx
        # 0. cancelled jobs that wait for a pod end before anything is assigned
        if ctx.queue().cancels:
            await end_cancelled(ctx)
        # 1. an effect task for every open request
        for pod in pods_in(ctx.fleet(), BOOTING):
            self._spawn("provision", pod.pod_id, provision)
        for job in active_jobs(ctx.queue()):
            holder = ctx.fleet().pods.get(job.pod_id)
            if holder is not None and holder.status == "busy" and holder.job_id == job.job_id:
                self._spawn("job", job.job_id, run_attempt)
            elif ("job", job.job_id) not in self._tasks:
                why = f"pod {job.pod_id} is {holder.status}: {holder.reason}" if holder else f"pod {job.pod_id} unknown"
                await end_attempt_lost(ctx, job.job_id, job.key, why)
        now = ctx.now()
        for pod in pods_in(ctx.fleet(), frozenset({"terminating"})):
            if self._terminate_retry.get(pod.pod_id, 0.0) <= now:
                self._spawn("terminate", pod.pod_id, self._terminate)
        # 2. lost pods are terminated (they may still bill)
        for pod in pods_in(ctx.fleet(), frozenset({"lost"})):
            await self._request_termination(pod.pod_id, pod.reason or "lost", frozenset({"lost"}))
        # 3. GPU time
        await self._billing()
        # 3b. a pod beyond max_pods (an upgrade came up) is retired when the priciest comes free
        surplus = surplus_pod(ctx.queue(), ctx.fleet(), self.config)
        if surplus is not None:
            await self._request_termination(surplus.pod_id, "upgraded", AVAILABLE)
        # 4. assignments
        while await ctx.emit_if(lambda: assignment(ctx.queue(), ctx.fleet(), self.config)) is not None:
            pass
        # 5. reaping
        drained = self.once and not _count(ctx.queue(), WAITING | ACTIVE)
        for pod, reason in idle_reaps(ctx.queue(), ctx.fleet(), self.config, ctx.now(), drained=drained):
            await self._request_termination(pod.pod_id, reason, AVAILABLE)
        # 6. launches
        while await self._launch_one():
            pass
        # 7. health of available pods
        now = ctx.now()
        for pod in pods_in(ctx.fleet(), AVAILABLE):
            if now - self._last_health.get(pod.pod_id, float("-inf")) >= self.config.health_every_s:
                self._last_health[pod.pod_id] = now
                self._spawn("health", pod.pod_id, check_health)

    async def _terminate(self, ctx: DispatchContext, pod_id: str) -> None:
        if not await terminate(ctx, pod_id):
            self._terminate_retry[pod_id] = self.ctx.now() + self.config.error_backoff_s

    async def _request_termination(self, pod_id: str, reason: str, allowed: frozenset[str]) -> None:
        def decide() -> PodTerminating | None:
            pod = self.ctx.fleet().pods.get(pod_id)
            if pod is None or pod.status not in allowed:
                return None
            return PodTerminating(pod_id=pod_id, provider_id=pod.provider_id, reason=reason)

        if await self.ctx.emit_if(decide) is not None:
            log.info("pod.terminating", pod_id=pod_id, reason=reason)

    # -- launching ---------------------------------------------------------------------------------

    def _budget_fingerprint(self) -> tuple[int, ...]:
        b = self.ctx.budget()
        caps = tuple(-1 if c is None else c for c in (b.episode_cap, b.run_cap, b.global_cap))
        return (b.settled, b.reserved, b.global_before, *caps)

    def budget_blocked(self) -> bool:
        """A launch was refused and nothing that could change the answer has happened since."""
        return self._budget_refused_at is not None and self._budget_refused_at == self._budget_fingerprint()

    async def _launch_one(self) -> bool:
        ctx = self.ctx
        if ctx.blocked or self.budget_blocked():
            return False
        fleet, now = ctx.fleet(), ctx.now()
        recent = fleet.last_failure_ts and now - fleet.last_failure_ts < self.config.error_backoff_s
        if recent and not fleet.last_failure.startswith("stock_out"):
            return False
        choice: tuple[int, str] | None = None
        if sum(1 for p in fleet.pods.values() if p.status in LIVE) < self.config.max_pods:
            target = launch_target(ctx.queue(), fleet, self.config)
            if target is not None:
                choice = choose_rung(fleet, self.config, now, target.base_model)
                if choice is None:
                    return False  # every rung is out of stock: wait for a cooldown to pass
                if fallback_waits(choice[0], target, ctx.queue(), fleet, self.config, now):
                    return False  # a pod on a cheaper rung will take the work soon
        if choice is None:
            choice = upgrade_launch(ctx.queue(), fleet, self.config, now)
        if choice is None:
            return False
        rung, label = choice
        gpu, count = parse_rung(label)
        pod_id = f"p{fleet.requested}"
        gate = ctx.ports.gate
        usd = self._prices().gpu_usd(gpu, seconds=self.config.reserve_s, count=count)
        try:
            reservation = await gate.reserve("job", pod_ref(pod_id), usd, item=gpu)
        except BudgetRefused as exc:
            self._budget_refused_at = self._budget_fingerprint()
            log.warning("fleet.budget_refused", pod_id=pod_id, gpu_type=gpu, message=str(exc))
            return False
        provider = ctx.ports.provider.name
        body = PodRequested(
            pod_id=pod_id,
            gpu_type=gpu,
            gpu_count=count,
            provider=provider,
            rung=rung,
            reservation_id=reservation.reservation_id,
            pins=dict(self.config.pins),
        )
        await ctx.emit(body)
        log.info("pod.requested", pod_id=pod_id, gpu_type=gpu, gpu_count=count, rung=rung)
        return True

    # -- money -------------------------------------------------------------------------------------

    def _price(self, gpu_type: str, reported: float, count: int = 1) -> float:
        """The pod's USD/hour: what the provider reported for it, else the price table's per-GPU rate x GPUs."""
        if reported > 0:
            return reported
        return self._prices().gpu(gpu_type).usd_per_hour * count if gpu_type else 0.0

    async def _billing(self) -> None:
        ctx = self.ctx
        gate = ctx.ports.gate
        open_ = ctx.budget().open
        # Gone and settled pods are skipped before sorting: a long run with many stock-outs has thousands.
        paid_up = self._paid_up
        open_pods = (p for p in ctx.fleet().pods.values() if p.status != "gone" or p.pod_id not in paid_up)
        for pod in sorted(open_pods, key=lambda p: p.pod_id):
            if pod.pod_id in paid_up:
                paid_up.discard(pod.pod_id)  # reopened (its name turned up at the provider again)
            rate = self._price(pod.gpu_type, pod.usd_per_hour, pod.gpu_count)
            if pod.status == "gone":
                owed, seconds = owed_usd(pod, rate, pod.ended_ts)
                if pod.reservation_id in open_:
                    if not pod.created_ts:
                        await gate.release(pod.reservation_id, reason=f"pod {pod.pod_id} never started")
                    else:
                        await gate.settle(pod.reservation_id, owed, seconds=seconds, price_version=self._prices_label())
                elif owed >= _MICRO_USD and not pod.reservation_id:
                    # Ran past its reservations (a refused chunk, or a pod adopted after its hold was charged).
                    await ctx.emit(
                        charge_unreserved("job", pod_ref(pod.pod_id), owed, item=pod.gpu_type, seconds=seconds)
                    )
                elif owed < _MICRO_USD and not pod.reservation_id:
                    self._paid_up.add(pod.pod_id)  # gone and settled: nothing more to do for it (until reopened)
                continue
            if not pod.created_ts or pod.status not in LIVE:
                continue
            held = open_.get(pod.reservation_id)
            if held is None and not pod.draining:
                await self._reserve_chunk(pod.pod_id, pod.gpu_type, pod.gpu_count)
            elif held is not None and held.micros > 0:
                owed, seconds = owed_usd(pod, rate, ctx.now())
                if owed * 1_000_000 >= 0.9 * held.micros:  # 90% used: pay it and reserve the next chunk
                    await gate.settle(pod.reservation_id, owed, seconds=seconds, price_version=self._prices_label())
                    await self._reserve_chunk(pod.pod_id, pod.gpu_type, pod.gpu_count)

    def _prices(self) -> PriceTable:
        prices = self.ctx.ports.gate.prices
        if prices is None:
            raise DispatcherFatal("the dispatcher's BudgetGate has no price table: GPU time cannot be reserved")
        return prices

    def _prices_label(self) -> str:
        prices = self.ctx.ports.gate.prices
        return prices.label if prices else ""

    async def _reserve_chunk(self, pod_id: str, gpu_type: str, count: int = 1) -> None:
        gate = self.ctx.ports.gate
        usd = self._prices().gpu_usd(gpu_type, seconds=self.config.reserve_s, count=count) if gpu_type else 0.0
        try:
            await gate.reserve("job", pod_ref(pod_id), usd, item=gpu_type)
        except BudgetRefused as exc:  # the fleet projection marks the pod draining
            log.warning("fleet.chunk_refused", pod_id=pod_id, message=str(exc))

    # -- resume ------------------------------------------------------------------------------------

    async def reconcile(self) -> None:
        """Match the provider's pods with this run's prefix against the log: adopt or terminate each."""
        ctx = self.ctx
        try:
            listed = await ctx.ports.provider.list_pods(run_prefix(ctx.run_id))
        except ProviderAuthError as exc:
            raise DispatcherFatal(str(exc)) from None
        except ProvisionError as exc:
            log.warning("fleet.reconcile_skipped", error=str(exc))
            return
        seen: set[str] = set()
        for info in sorted(listed, key=lambda p: (p.name, p.provider_id)):
            parsed = parse_pod_name(info.name)
            if info.state is PodState.GONE or parsed is None or parsed[0] != ctx.run_id:
                continue
            pod_id = parsed[1]
            pod = ctx.fleet().pods.get(pod_id)
            same = pod is not None and pod.provider_id in ("", info.provider_id)
            if pod is not None and same and pod.status in LIVE and pod_id not in seen:
                seen.add(pod_id)
                if pod.status == "requested":
                    await ctx.emit(
                        PodCreated(
                            pod_id=pod_id, provider_id=info.provider_id, usd_per_hour=info.usd_per_hour, adopted=True
                        )
                    )
                log.info("fleet.adopted", pod_id=pod_id, provider_id=info.provider_id, status=pod.status)
            elif pod is not None and same and pod.status in ("lost", "terminating"):
                continue  # already on its way out
            else:
                log.warning("fleet.orphan", pod_id=pod_id, provider_id=info.provider_id)
                await ctx.emit(PodTerminating(pod_id=pod_id, provider_id=info.provider_id, reason="orphan"))
        listed_ids = {p.provider_id for p in listed if p.state is not PodState.GONE}
        for pod in pods_in(ctx.fleet(), LIVE):
            if pod.provider_id and pod.provider_id not in listed_ids and pod.status not in BOOTING:
                await ctx.emit(PodLost(pod_id=pod.pod_id, reason="not found at the provider on resume"))
        # A reservation taken for a pod whose pod.requested never made it to the log.
        for rid, r in sorted(ctx.budget().open.items()):
            ref_pod = pod_of_ref(r.ref)
            if ref_pod is not None and ref_pod not in ctx.fleet().pods:
                await ctx.ports.gate.release(rid, reason="the pod was never requested (crash before pod.requested)")

    # -- ending ------------------------------------------------------------------------------------

    def _finished(self) -> DispatchSummary | None:
        self._check_fatal()
        q, f = self.ctx.queue(), self.ctx.fleet()
        # From the projection's per-status counts: this runs on every pass, and a long run has many jobs.
        waiting, active = _count(q, WAITING), _count(q, ACTIVE)
        pods_busy = any(p.status in LIVE | {"lost", "terminating"} for p in f.pods.values())

        def summary(status: str, message: str = "") -> DispatchSummary:
            counts = q.counts
            return DispatchSummary(
                status=status,
                succeeded=counts.get("succeeded", 0),
                failed=counts.get("failed", 0),
                waiting=waiting,
                message=message,
            )

        if active or pods_busy or self._tasks.keys() - {("health", p) for p in f.pods}:
            return None
        if not waiting:
            return summary("drained") if self.once else None
        # Work waits, no pod is alive and none is on its way: can anything start one?
        if self.ctx.blocked:
            return summary("blocked", f"no pod can be launched: {self.ctx.blocked}")
        if self.budget_blocked() and self.once:
            return summary("budget", f"the budget refused a new pod: {f.last_refusal or 'see cost.refused'}")
        return None
