"""Budgets: the spend projection and the reserve -> settle | release rules that keep spend under every cap.

Three caps apply at once: per episode (the spend charged to one episode: its agent calls and its job), per
run, and a global cap over every run in the cross-run ledger. ``budget.set`` brings the caps and the other
runs' spend into the log at run start and at every resume, so the projection is a pure fold.

Rules (docs/reward.md, "Budgets"):

- *Committed* spend = settled spend + open reservations. A reservation is granted only if committed + the
  amount stays within every cap that applies; otherwise ``cost.refused`` names the most binding budget.
- A reservation is an upper bound (max tokens, max pod seconds). It is closed by exactly one settlement
  (the real spend, higher or lower) or one release (nothing spent).
- Money spent is never lost: a settlement above its reservation is recorded in full and the excess is
  counted as *overrun*. Overrun is the only way committed spend can pass a cap; while a cap is passed, every
  reservation under it is refused. Invariant, checked by the stateful test: for each cap,
  ``committed - overrun <= cap``.
- Amounts are tracked in integer micro-USD, so sums and cap checks are exact and replay bit-for-bit.

Concurrency: decide and emit with no ``await`` in between. :class:`BudgetGate` is the only API that emits; it
reads the projection and emits in one synchronous step (the runtime applies an event before its first await),
so concurrent reservations can never both pass a cap.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import msgspec

import handlers.budget.training_cost  # noqa: F401  (registers the training-cost deriver for replay --verify)
from engine.lazylog import lazy_logger
from engine.projection import Projection, handles
from events import EventBody, Recorded
from events.money import BudgetSet, CostRefused, CostReleased, CostReserved, CostSettled
from handlers.budget.prices import PriceTable

if TYPE_CHECKING:
    from engine.runtime import Runtime

__all__ = [
    "BUDGETS",
    "KINDS",
    "BudgetConfig",
    "BudgetGate",
    "BudgetProjection",
    "BudgetRefused",
    "BudgetState",
    "EpisodeSpend",
    "Hold",
    "OpenReservation",
    "UnknownReservation",
    "budget_set",
    "charge_unreserved",
    "committed",
    "orphan_settlements",
    "release",
    "remaining_usd",
    "reserve",
    "settle",
    "to_micros",
]

log = lazy_logger(__name__)

MICROS_PER_USD: Final = 1_000_000
KINDS: Final = ("episode", "job", "baseline", "holdout", "training")
BUDGETS: Final = ("episode", "run", "global")


def to_micros(usd: float) -> int:
    """USD to integer micro-USD (the projection's unit). Resolution: one millionth of a dollar."""
    return round(usd * MICROS_PER_USD)


def _usd(micros: int) -> float:
    return micros / MICROS_PER_USD


def _cap(usd: float | None) -> int | None:
    return None if usd is None or math.isinf(usd) else to_micros(usd)


class BudgetConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``[budget]`` table of the run config. A cap of ``inf`` (TOML ``inf``) means no cap."""

    episode_usd: float = 2.0  # an episode's agent tokens plus its one job (~$0.15-0.25 + ~$0.13-0.30 in the seed)
    run_usd: float = 100.0
    global_usd: float = 1500.0  # across every run in the ledger
    ledger: str = "runs/costs.jsonl"
    prices: str = ""  # price table file; "" = the packaged handlers/budget/prices.toml

    def __post_init__(self) -> None:
        for name in ("episode_usd", "run_usd", "global_usd"):
            value = getattr(self, name)
            if math.isnan(value) or value < 0:
                raise ValueError(f"budget.{name}: must be a number >= 0 (or inf for no cap), got {value!r}")

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, source: str = "run config") -> BudgetConfig:
        """Build from a parsed ``[budget]`` table; errors name ``source`` and the key."""
        known = set(cls.__struct_fields__)
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError(f"{source}: [budget] has unknown key(s) {unknown}; known: {sorted(known)}")
        values: dict[str, Any] = {}
        for key, value in table.items():
            if key in ("ledger", "prices"):
                if not isinstance(value, str):
                    raise ValueError(f"{source}: budget.{key}: expected a path string, got {value!r}")
                values[key] = value
            elif value is None:
                # No cap. TOML has no null, so this comes from a recorded config: JSON writes inf as null (and
                # budget.set events say "no cap" with None), so a resumed run reads its own `inf` back this way.
                values[key] = math.inf
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{source}: budget.{key}: expected a number of USD, got {value!r}")
            else:
                values[key] = float(value)
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


def budget_set(config: BudgetConfig, *, global_spent_before_usd: float) -> BudgetSet:
    """The ``budget.set`` event to emit at run start and at every resume.

    ``global_spent_before_usd`` is the ledger total of every *other* run
    (``CostsLedger.total_usd(exclude_run=run_id)``): this run's own spend comes from its log.
    """
    return BudgetSet(
        episode_usd=None if math.isinf(config.episode_usd) else config.episode_usd,
        run_usd=None if math.isinf(config.run_usd) else config.run_usd,
        global_usd=None if math.isinf(config.global_usd) else config.global_usd,
        global_spent_before_usd=global_spent_before_usd,
        ledger=config.ledger,
    )


class OpenReservation(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    ref: str
    episode_id: str
    item: str
    micros: int


class EpisodeSpend(msgspec.Struct, kw_only=True):
    reserved: int = 0
    settled: int = 0
    overrun: int = 0
    refused: str = ""  # the first budget that refused this episode anything


class BudgetState(msgspec.Struct, kw_only=True):
    """Spend of this run in micro-USD. Caps are ``None`` when absent."""

    episode_cap: int | None = None
    run_cap: int | None = None
    global_cap: int | None = None
    global_before: int = 0  # other runs' settled spend, from the last budget.set
    open: dict[str, OpenReservation] = {}
    reserved: int = 0  # sum of open reservations
    settled: int = 0  # every settled cost of this run
    overrun: int = 0  # settled beyond what was reserved
    episodes: dict[str, EpisodeSpend] = {}
    settled_by_kind: dict[str, int] = {}
    issued: int = 0  # reservations ever made; the next id is f"res-{issued}"
    settlements: int = 0
    refusals: int = 0


def committed(state: BudgetState, budget: str, episode_id: str = "") -> int:
    """Settled + reserved micro-USD that count against ``budget`` ("episode" needs ``episode_id``)."""
    if budget == "episode":
        ep = state.episodes.get(episode_id)
        return 0 if ep is None else ep.settled + ep.reserved
    run = state.settled + state.reserved
    return run if budget == "run" else state.global_before + run


def _caps(state: BudgetState, episode_id: str) -> list[tuple[str, int]]:
    caps = [
        ("episode", state.episode_cap if episode_id else None),
        ("run", state.run_cap),
        ("global", state.global_cap),
    ]
    return [(name, cap) for name, cap in caps if cap is not None]


def remaining_usd(state: BudgetState, episode_id: str = "") -> dict[str, float]:
    """USD left under each cap that applies (negative after an overrun)."""
    return {name: _usd(cap - committed(state, name, episode_id)) for name, cap in _caps(state, episode_id)}


def _check_usd(usd: float) -> None:
    if not (math.isfinite(usd) and usd >= 0):
        raise ValueError(f"usd must be a finite number >= 0, got {usd!r}")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"cost kind must be one of {KINDS}, got {kind!r}")


def reserve(
    state: BudgetState, kind: str, ref: str, usd: float, *, episode_id: str = "", item: str = ""
) -> CostReserved | CostRefused:
    """Decide a reservation against ``state``: the event to emit. Pure; emit the result before any await."""
    _check_kind(kind)
    _check_usd(usd)
    need = to_micros(usd)
    refusals = [
        (cap - committed(state, name, episode_id), name, cap)
        for name, cap in _caps(state, episode_id)
        if committed(state, name, episode_id) + need > cap
    ]
    if refusals:
        left, name, cap = min(refusals)  # the most binding budget
        what = f"{kind} {ref}" + (f" (episode {episode_id})" if episode_id and episode_id != ref else "")
        return CostRefused(
            kind=kind,
            ref=ref,
            budget=name,
            requested_usd=usd,
            remaining_usd=_usd(left),
            episode_id=episode_id,
            item=item,
            message=f"{name} budget refused ${usd:.4f} for {what}: ${_usd(left):.4f} of ${_usd(cap):.2f} left",
        )
    return CostReserved(
        reservation_id=f"res-{state.issued}", kind=kind, ref=ref, usd=usd, episode_id=episode_id, item=item
    )


class UnknownReservation(KeyError):
    """Settling or releasing a reservation that is not open (never made, or already closed)."""

    def __str__(self) -> str:
        return str(self.args[0])


def _open(state: BudgetState, reservation_id: str) -> OpenReservation:
    r = state.open.get(reservation_id)
    if r is None:
        raise UnknownReservation(f"reservation {reservation_id!r} is not open (never made, or already closed)")
    return r


def settle(
    state: BudgetState,
    reservation_id: str,
    usd: float,
    *,
    input_tokens: int = 0,
    cached_input_tokens: int = 0,
    output_tokens: int = 0,
    train_tokens: int = 0,
    seconds: float = 0.0,
    price_version: str = "",
    estimated: bool = False,
    note: str = "",
) -> CostSettled:
    """The settlement of an open reservation with what was really spent (above or below the reservation)."""
    _check_usd(usd)
    r = _open(state, reservation_id)
    return CostSettled(
        reservation_id=reservation_id,
        kind=r.kind,
        ref=r.ref,
        usd=usd,
        reserved_usd=_usd(r.micros),
        item=r.item,
        input_tokens=input_tokens,
        cached_input_tokens=cached_input_tokens,
        output_tokens=output_tokens,
        train_tokens=train_tokens,
        seconds=seconds,
        episode_id=r.episode_id,
        price_version=price_version,
        estimated=estimated,
        note=note,
    )


def release(state: BudgetState, reservation_id: str, reason: str = "") -> CostReleased:
    """Close an open reservation with nothing spent (the call failed before anything was billed)."""
    r = _open(state, reservation_id)
    return CostReleased(reservation_id=reservation_id, kind=r.kind, ref=r.ref, reason=reason, episode_id=r.episode_id)


def charge_unreserved(
    kind: str, ref: str, usd: float, *, episode_id: str = "", item: str = "", seconds: float = 0.0, note: str = ""
) -> CostSettled:
    """Spend discovered with no reservation (a lost pod that kept billing): recorded in full as overrun."""
    _check_kind(kind)
    _check_usd(usd)
    return CostSettled(
        reservation_id="", kind=kind, ref=ref, usd=usd, episode_id=episode_id, item=item, seconds=seconds, note=note
    )


def orphan_settlements(state: BudgetState, note: str = "open at resume: charged the reservation") -> list[CostSettled]:
    """For the resume path: settle every reservation left open by a crash at its reserved amount.

    The call it covered may or may not have been billed; charging the reservation errs towards safety. A
    reactor that retries the effect reserves again; the fleet re-reserves for pods that survived.
    """
    return [settle(state, rid, _usd(r.micros), estimated=True, note=note) for rid, r in sorted(state.open.items())]


class BudgetProjection(Projection[BudgetState]):
    """The run's spend, reservations and caps, folded from money events."""

    name = "budget"
    state_type = BudgetState

    def initial(self) -> BudgetState:
        return BudgetState()

    @staticmethod
    def _episode(state: BudgetState, episode_id: str) -> EpisodeSpend | None:
        if not episode_id:
            return None
        ep = state.episodes.get(episode_id)
        if ep is None:
            ep = state.episodes[episode_id] = EpisodeSpend()
        return ep

    @handles(BudgetSet)
    def _set(self, state: BudgetState, e: BudgetSet) -> BudgetState:
        state.episode_cap = _cap(e.episode_usd)
        state.run_cap = _cap(e.run_usd)
        state.global_cap = _cap(e.global_usd)
        state.global_before = to_micros(e.global_spent_before_usd)
        return state

    @handles(CostReserved)
    def _reserved(self, state: BudgetState, e: CostReserved) -> BudgetState:
        m = to_micros(e.usd)
        prior = state.open.get(e.reservation_id)
        # A duplicate id is a caller bug (the gate prevents it); adding the amounts keeps committed spend exact.
        total = m + (prior.micros if prior else 0)
        state.open[e.reservation_id] = OpenReservation(
            kind=e.kind, ref=e.ref, episode_id=e.episode_id, item=e.item, micros=total
        )
        state.reserved += m
        state.issued += 1
        ep = self._episode(state, e.episode_id)
        if ep is not None:
            ep.reserved += m
        return state

    def _close(self, state: BudgetState, reservation_id: str) -> int:
        r = state.open.pop(reservation_id, None) if reservation_id else None
        if r is None:
            return 0
        state.reserved -= r.micros
        ep = self._episode(state, r.episode_id)
        if ep is not None:
            ep.reserved -= r.micros
        return r.micros

    @handles(CostSettled)
    def _settled(self, state: BudgetState, e: CostSettled) -> BudgetState:
        m = round(e.usd * MICROS_PER_USD)  # to_micros, inlined: a replay settles every job and pod chunk
        # Settling a reservation that is not open (unreserved spend, or a second settlement) still counts in
        # full: money spent is never lost, and all of it is overrun.
        rid = e.reservation_id
        over = m - self._close(state, rid) if rid and rid in state.open else m
        if over < 0:
            over = 0
        state.settled += m
        state.overrun += over
        state.settlements += 1
        by_kind = state.settled_by_kind
        by_kind[e.kind] = by_kind.get(e.kind, 0) + m
        if e.episode_id:
            ep = self._episode(state, e.episode_id)
            if ep is not None:
                ep.settled += m
                ep.overrun += over
        return state

    @handles(CostReleased)
    def _released(self, state: BudgetState, e: CostReleased) -> BudgetState:
        self._close(state, e.reservation_id)
        return state

    @handles(CostRefused)
    def _refused(self, state: BudgetState, e: CostRefused) -> BudgetState:
        state.refusals += 1
        ep = self._episode(state, e.episode_id)
        if ep is not None and not ep.refused:
            ep.refused = e.budget
        return state


class BudgetRefused(Exception):
    """A reservation was refused; the ``cost.refused`` event is already in the log. End the episode cleanly."""

    def __init__(self, refusal: CostRefused) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


Emit = Callable[[EventBody], Awaitable[Recorded]]
OnError = Literal["charge", "release"]


class BudgetGate:
    """The one way to reserve, settle and release: each decision is taken and emitted in one atomic step.

    ``emit`` is the runtime's ``emit`` (it applies the event to the projections before its first await) and
    ``state`` returns the live :class:`BudgetState` of the :class:`BudgetProjection` it applies to. Each method
    reads the state and calls ``emit`` with no await in between, so no other task can act on the same state.
    """

    def __init__(self, emit: Emit, state: Callable[[], BudgetState], prices: PriceTable | None = None) -> None:
        self._emit = emit
        self._state = state
        self.prices = prices

    @classmethod
    def for_runtime(cls, runtime: Runtime, prices: PriceTable | None = None) -> BudgetGate:
        """The gate over a runtime whose projections include a :class:`BudgetProjection`."""
        if not isinstance(runtime.state(BudgetProjection), BudgetState):
            raise TypeError("the runtime has no BudgetProjection")
        # Durable emits: a reservation precedes a spend that leaves the process (a pod, a paid call), so it
        # must be on disk before the gate lets the caller go on (commit before effect); settlements too, so
        # that a crash after a settle never charges the reservation again as an orphan.
        return cls(runtime.emit_durable, lambda: runtime.state(BudgetProjection), prices)

    @property
    def state(self) -> BudgetState:
        return self._state()

    def remaining_usd(self, episode_id: str = "") -> dict[str, float]:
        return remaining_usd(self._state(), episode_id)

    async def reserve(self, kind: str, ref: str, usd: float, *, episode_id: str = "", item: str = "") -> CostReserved:
        """Reserve ``usd`` or raise :class:`BudgetRefused` (after recording the refusal)."""
        decision = reserve(self._state(), kind, ref, usd, episode_id=episode_id, item=item)
        await self._emit(decision)  # atomic with the decision: emit applies before it first suspends
        if isinstance(decision, CostRefused):
            log.info("budget.refused", budget=decision.budget, kind=kind, ref=ref, usd=usd)
            raise BudgetRefused(decision)
        return decision

    async def settle(self, reservation_id: str, usd: float, **usage: Any) -> CostSettled:
        """Settle an open reservation with the real spend; raises :class:`UnknownReservation` if not open."""
        body = settle(self._state(), reservation_id, usd, **usage)
        await self._emit(body)
        if body.usd > body.reserved_usd:
            log.warning("budget.overrun", reservation_id=reservation_id, reserved_usd=body.reserved_usd, usd=usd)
        return body

    async def record_free(self, kind: str, ref: str, *, item: str = "", **usage: Any) -> CostSettled:
        """Record usage that costs nothing (a zero-priced item) without a reservation: a cap already spent must not
        refuse what is free, and the ledger still shows the usage."""
        _check_kind(kind)
        price_version = self.prices.label if self.prices is not None else ""
        body = CostSettled(
            reservation_id="", kind=kind, ref=ref, usd=0.0, item=item, price_version=price_version, **usage
        )
        await self._emit(body)
        return body

    async def release(self, reservation_id: str, reason: str = "") -> CostReleased:
        body = release(self._state(), reservation_id, reason)
        await self._emit(body)
        return body

    async def settle_orphans(self) -> list[CostSettled]:
        """On resume, before any reactor runs: charge every reservation a crash left open."""
        done: list[CostSettled] = []
        for rid in sorted(self._state().open):  # only those open now: later reservations are not orphans
            still = [b for b in orphan_settlements(self._state()) if b.reservation_id == rid]
            for body in still:  # checked and emitted with no await in between
                await self._emit(body)
                done.append(body)
        return done

    def hold(
        self, kind: str, ref: str, usd: float, *, episode_id: str = "", item: str = "", on_error: OnError = "charge"
    ) -> Hold:
        """``async with gate.hold(...) as h:`` reserve on entry, ``await h.settle(...)`` inside.

        Leaving without settling charges the reservation (``estimated``); leaving on an exception does the same
        unless ``on_error="release"`` (for calls that are not billed when they fail).
        """
        return Hold(self, kind, ref, usd, episode_id=episode_id, item=item, on_error=on_error)

    def _prices(self) -> PriceTable:
        if self.prices is None:
            raise RuntimeError("this BudgetGate has no price table; pass prices= to price LLM calls or GPU time")
        return self.prices

    def llm_call(
        self,
        model: str,
        *,
        max_input_tokens: int,
        max_output_tokens: int,
        kind: str,
        ref: str,
        episode_id: str = "",
        on_error: OnError = "release",
    ) -> Hold:
        """A hold for one LLM call, reserved at its worst case (all input uncached, every output token)."""
        usd = self._prices().llm_max_usd(model, max_input_tokens=max_input_tokens, max_output_tokens=max_output_tokens)
        return self.hold(kind, ref, usd, episode_id=episode_id, item=model, on_error=on_error)

    def gpu_time(
        self,
        gpu_type: str,
        *,
        max_seconds: float,
        kind: str,
        ref: str,
        gpus: int = 1,
        episode_id: str = "",
        on_error: OnError = "charge",
    ) -> Hold:
        """A hold for ``gpus`` GPUs of ``gpu_type`` for at most ``max_seconds`` (reserve in chunks for long pods)."""
        usd = self._prices().gpu_usd(gpu_type, seconds=max_seconds, count=gpus)
        return Hold(self, kind, ref, usd, episode_id=episode_id, item=gpu_type, on_error=on_error, gpus=gpus)


class Hold:
    """An open reservation used as an async context manager (see :meth:`BudgetGate.hold`)."""

    def __init__(
        self,
        gate: BudgetGate,
        kind: str,
        ref: str,
        usd: float,
        *,
        episode_id: str,
        item: str,
        on_error: OnError,
        gpus: int = 1,
    ) -> None:
        self._gate = gate
        self._args = (kind, ref, usd)
        self._episode_id = episode_id
        self.item = item
        self._on_error = on_error
        self._gpus = gpus
        self.reservation: CostReserved | None = None
        self.settlement: CostSettled | None = None
        self._closed = False

    async def __aenter__(self) -> Hold:
        kind, ref, usd = self._args
        self.reservation = await self._gate.reserve(kind, ref, usd, episode_id=self._episode_id, item=self.item)
        return self

    @property
    def reservation_id(self) -> str:
        if self.reservation is None:
            raise RuntimeError("the hold is not entered")
        return self.reservation.reservation_id

    async def settle(self, usd: float, **usage: Any) -> CostSettled:
        if self._closed:
            raise RuntimeError(f"reservation {self.reservation_id} is already closed")
        price_version = usage.pop("price_version", self._gate.prices.label if self._gate.prices else "")
        self.settlement = await self._gate.settle(self.reservation_id, usd, price_version=price_version, **usage)
        self._closed = True
        return self.settlement

    async def settle_llm(
        self, *, input_tokens: int, cached_input_tokens: int = 0, output_tokens: int = 0
    ) -> CostSettled:
        """Settle with the call's real usage, priced for the held model."""
        usd = self._gate._prices().llm_usd(
            self.item, input_tokens=input_tokens, cached_input_tokens=cached_input_tokens, output_tokens=output_tokens
        )
        return await self.settle(
            usd, input_tokens=input_tokens, cached_input_tokens=cached_input_tokens, output_tokens=output_tokens
        )

    async def settle_gpu(self, *, seconds: float) -> CostSettled:
        """Settle with the seconds the GPUs were really held."""
        usd = self._gate._prices().gpu_usd(self.item, seconds=seconds, count=self._gpus)
        return await self.settle(usd, seconds=seconds)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._closed or self.reservation is None:
            return
        self._closed = True
        if self.reservation_id not in self._gate.state.open:
            # Closed already: a settle whose event was applied, then cancelled while it awaited durability
            # (the emit applies before it first suspends). Closing it again would raise UnknownReservation.
            return
        name = exc_type.__name__ if exc_type else ""
        # Shielded: a cancelled task still closes its reservation (and waits for that to be durable).
        with anyio.CancelScope(shield=True):
            if exc is not None and self._on_error == "release":
                await self._gate.release(self.reservation_id, reason=f"{name}: {exc}")
                return
            # Unknown real spend: charge the reservation, the safe upper bound. Money is never under-counted.
            why = f"left on {name}" if exc_type else "left without settling"
            await self._gate.settle(
                self.reservation_id, self.reservation.usd, estimated=True, note=f"{why}: charged the reservation"
            )
