"""Budgets: reservation rules, the gate under real concurrency, and a stateful test of caps, settlements,
failures and restarts against the log and the cross-run ledger."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.clock import ManualClock
from engine.log import read_log
from engine.replay import replay
from engine.runtime import Runtime
from events import EventBody, Recorded
from events.codec import decode_record, encode_record
from events.money import BudgetSet, CostRefused, CostReleased, CostReserved, CostSettled
from handlers.budget.costs_ledger import CostsLedger, rows_from_log
from handlers.budget.prices import load_prices
from handlers.budget.rules import (
    BUDGETS,
    KINDS,
    BudgetConfig,
    BudgetGate,
    BudgetProjection,
    BudgetRefused,
    BudgetState,
    UnknownReservation,
    budget_set,
    charge_unreserved,
    committed,
    orphan_settlements,
    release,
    remaining_usd,
    reserve,
    settle,
    to_micros,
)

PROJ = BudgetProjection()
ENC = msgspec.json.Encoder(order="deterministic")
PRICES = load_prices()


def fold(*bodies: EventBody) -> BudgetState:
    return PROJ.fold(Recorded(i, float(i), b) for i, b in enumerate(bodies))


def caps_of(state: BudgetState, episode_id: str) -> dict[str, int]:
    caps = {"episode": state.episode_cap if episode_id else None, "run": state.run_cap, "global": state.global_cap}
    return {k: v for k, v in caps.items() if v is not None}


def overrun_of(state: BudgetState, name: str, episode_id: str) -> int:
    if name == "episode":
        return state.episodes[episode_id].overrun if episode_id in state.episodes else 0
    return state.overrun


def assert_within_caps(state: BudgetState) -> None:
    """For every cap: committed - overrun <= cap (overrun is the only way past a cap)."""
    for ep in [*state.episodes, ""]:
        for name, cap in caps_of(state, ep).items():
            # Other runs may already have spent past the global cap; then this run may add nothing.
            limit = max(cap, state.global_before) if name == "global" else cap
            assert committed(state, name, ep) - overrun_of(state, name, ep) <= limit, (name, ep)


# -- the rules, one at a time --------------------------------------------------------------------------


def test_reserve_within_caps_then_refuse_naming_the_most_binding_budget() -> None:
    s = fold(BudgetSet(episode_usd=1.0, run_usd=5.0, global_usd=10.0, global_spent_before_usd=9.5))
    r = reserve(s, "episode", "ep-1", 0.4, episode_id="ep-1")
    assert isinstance(r, CostReserved) and r.reservation_id == "res-0"
    s = PROJ.fold([Recorded(1, 1.0, r)], s)
    no = reserve(s, "episode", "ep-1", 0.2, episode_id="ep-1")  # episode has 0.6 left, global only 0.1
    assert isinstance(no, CostRefused)
    assert no.budget == "global" and no.remaining_usd == pytest.approx(0.1)
    assert "global budget refused $0.2000" in no.message
    no = reserve(s, "episode", "ep-1", 0.7, episode_id="ep-1")
    assert isinstance(no, CostRefused) and no.budget == "global"
    s2 = fold(BudgetSet(episode_usd=1.0, run_usd=5.0))
    assert isinstance(reserve(s2, "job", "j", 1.5), CostReserved)  # no episode: its cap does not apply
    no = reserve(s2, "job", "j", 1.5, episode_id="ep-9")
    assert isinstance(no, CostRefused) and no.budget == "episode" and no.remaining_usd == 1.0


def test_settle_higher_counts_in_full_and_blocks_further_reservations() -> None:
    s = fold(BudgetSet(episode_usd=1.0))
    r = reserve(s, "job", "j", 0.9, episode_id="ep")
    assert isinstance(r, CostReserved)
    s = PROJ.fold([Recorded(1, 1.0, r)], s)
    st_ = settle(s, r.reservation_id, 1.3, seconds=3600)
    assert st_.reserved_usd == pytest.approx(0.9) and st_.usd == 1.3
    s = PROJ.fold([Recorded(2, 2.0, st_)], s)
    assert s.settled == to_micros(1.3) and s.overrun == to_micros(0.4) and s.reserved == 0
    assert remaining_usd(s, "ep")["episode"] == pytest.approx(-0.3)
    assert isinstance(reserve(s, "episode", "ep", 0.0, episode_id="ep"), CostRefused)
    assert isinstance(reserve(s, "episode", "other", 0.5, episode_id="other"), CostReserved)


def test_release_frees_the_reservation_and_closed_ones_cannot_be_settled() -> None:
    s = fold(BudgetSet(run_usd=1.0))
    r = reserve(s, "episode", "e", 1.0)
    assert isinstance(r, CostReserved)
    s = PROJ.fold([Recorded(1, 1.0, r)], s)
    assert isinstance(reserve(s, "episode", "e", 0.01), CostRefused)
    rel = release(s, r.reservation_id, "connection reset")
    assert isinstance(rel, CostReleased)
    s = PROJ.fold([Recorded(2, 2.0, rel)], s)
    assert s.reserved == 0 and s.settled == 0
    assert isinstance(reserve(s, "episode", "e", 1.0), CostReserved)
    with pytest.raises(UnknownReservation, match="res-0"):
        settle(s, r.reservation_id, 0.1)
    with pytest.raises(UnknownReservation):
        release(s, "res-77")


def test_unreserved_spend_and_orphans_are_never_lost() -> None:
    s = fold(BudgetSet(run_usd=1.0), charge_unreserved("job", "pod-lost", 0.25, seconds=900))
    assert s.settled == to_micros(0.25) and s.overrun == to_micros(0.25)
    r = reserve(s, "episode", "e", 0.5, episode_id="e")
    assert isinstance(r, CostReserved)
    s = PROJ.fold([Recorded(2, 2.0, r)], s)
    orphans = orphan_settlements(s)
    assert [(o.reservation_id, o.usd, o.estimated) for o in orphans] == [("res-0", 0.5, True)]
    s = PROJ.fold([Recorded(3, 3.0, o) for o in orphans], s)
    assert s.open == {} and s.settled == to_micros(0.75) and s.episodes["e"].settled == to_micros(0.5)


def test_bad_requests_are_programming_errors() -> None:
    s = fold()
    with pytest.raises(ValueError, match="kind"):
        reserve(s, "lunch", "x", 1.0)
    with pytest.raises(ValueError, match="usd"):
        reserve(s, "job", "x", -1.0)
    with pytest.raises(ValueError, match="usd"):
        reserve(s, "job", "x", math.nan)


def test_budget_config_from_mapping() -> None:
    c = BudgetConfig.from_mapping({"episode_usd": 1, "global_usd": math.inf, "ledger": "x.jsonl"})
    assert c.episode_usd == 1.0 and c.ledger == "x.jsonl"
    ev = budget_set(c, global_spent_before_usd=12.5)
    assert ev.global_usd is None and ev.episode_usd == 1.0 and ev.global_spent_before_usd == 12.5
    with pytest.raises(ValueError, match=r"run\.toml: \[budget\] has unknown key"):
        BudgetConfig.from_mapping({"episode": 1}, source="run.toml")
    with pytest.raises(ValueError, match=r"budget\.run_usd: must be a number >= 0"):
        BudgetConfig.from_mapping({"run_usd": -2})
    with pytest.raises(ValueError, match=r"budget\.run_usd: expected a number"):
        BudgetConfig.from_mapping({"run_usd": "2"})
    # null (how JSON records inf in a run's recorded config) reads back as no cap
    assert BudgetConfig.from_mapping({"run_usd": None}).run_usd == math.inf


# -- the gate, through the real runtime ---------------------------------------------------------------


def open_runtime(directory: Path) -> Runtime:
    return Runtime(directory, [BudgetProjection()], clock=ManualClock(step=1.0), durability="none")


async def test_hold_settles_prices_releases_and_charges(tmp_path: Path) -> None:
    async with open_runtime(tmp_path / "run") as rt:
        await rt.emit(BudgetSet(episode_usd=1.0, run_usd=10.0))
        gate = BudgetGate.for_runtime(rt, PRICES)
        async with gate.llm_call(
            "gpt-4.1", max_input_tokens=20_000, max_output_tokens=2_000, kind="episode", ref="ep", episode_id="ep"
        ) as h:
            assert gate.state.reserved == to_micros(0.056)  # 20k * $2/M + 2k * $8/M, all uncached
            done = await h.settle_llm(input_tokens=10_000, cached_input_tokens=4_000, output_tokens=500)
            # 6k uncached * $2/M + 4k cached * $0.5/M + 500 * $8/M
        assert done.usd == pytest.approx(0.018) and done.price_version == PRICES.label and done.item == "gpt-4.1"
        with pytest.raises(OSError):
            async with gate.llm_call(
                "gpt-4.1", max_input_tokens=1000, max_output_tokens=10, kind="episode", ref="ep", episode_id="ep"
            ):
                raise OSError("connection reset")
        with pytest.raises(OSError):
            async with gate.gpu_time("A40", max_seconds=3600, kind="job", ref="j", episode_id="ep"):
                raise OSError("pod lost")
        async with gate.hold("holdout", "h", 0.125):
            pass  # left without settling
        with pytest.raises(BudgetRefused, match="episode budget refused") as info:
            async with gate.hold("episode", "ep", 0.9, episode_id="ep"):
                raise AssertionError("the body must not run when refused")
        assert info.value.refusal.budget == "episode"
        s = gate.state
        assert s.open == {} and s.refusals == 1 and s.episodes["ep"].refused == "episode"
        assert s.settled == to_micros(0.018) + to_micros(0.49) + to_micros(0.125)
    types = [r.event.type for r in read_log(tmp_path / "run" / "events.jsonl").records]
    assert types == ["budget.set"] + ["cost.reserved", "cost.settled"] + ["cost.reserved", "cost.released"] + [
        "cost.reserved",
        "cost.settled",
    ] * 2 + ["cost.refused"]
    result = replay(tmp_path / "run" / "events.jsonl", [BudgetProjection()])
    assert ENC.encode(result.states["budget"]) == ENC.encode(s)


async def test_a_cancelled_hold_still_closes_its_reservation(tmp_path: Path) -> None:
    async with open_runtime(tmp_path / "run") as rt:
        gate = BudgetGate.for_runtime(rt, PRICES)
        with anyio.CancelScope() as scope:
            async with gate.gpu_time("H100", max_seconds=7200, gpus=2, kind="job", ref="j"):
                scope.cancel()
                await anyio.sleep(10)
        assert gate.state.open == {}
        assert gate.state.settled == to_micros(2.39 * 2 * 2)  # charged: 2 GPUs x 2 h x $2.39
    last = read_log(tmp_path / "run" / "events.jsonl").records[-1].event
    assert isinstance(last, CostSettled) and last.estimated and "Cancelled" in last.note


async def test_a_hold_cancelled_while_its_settle_awaits_durability_is_not_closed_twice(tmp_path: Path) -> None:
    async with open_runtime(tmp_path / "run") as rt:
        gate = BudgetGate.for_runtime(rt, PRICES)
        applied = anyio.Event()

        async def slow_durable(body: Any) -> None:
            # The settle's event is applied at once (as emit does), then its fsync is slow and gets cancelled.
            rt.emit_nowait(body)
            if isinstance(body, CostSettled):
                applied.set()
                await anyio.sleep(10)

        gate._emit = slow_durable
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                async with gate.hold("episode", "ep", 0.5, episode_id="ep") as hold:
                    await hold.settle(0.25)

            tg.start_soon(run)
            await applied.wait()
            tg.cancel_scope.cancel()  # before this fix: __aexit__ settled again -> UnknownReservation
        assert gate.state.open == {} and gate.state.settled == to_micros(0.25)
    settles = [r.event for r in read_log(tmp_path / "run" / "events.jsonl").records if r.event.type == "cost.settled"]
    assert [(e.usd, e.estimated) for e in settles] == [(0.25, False)]


async def test_a_resumed_runtime_keeps_open_reservations_until_it_charges_the_orphans(tmp_path: Path) -> None:
    ledger = CostsLedger(tmp_path / "costs.jsonl")
    async with open_runtime(tmp_path / "run") as rt:
        await rt.emit(budget_set(BudgetConfig(run_usd=1.0), global_spent_before_usd=0.0))
        gate = BudgetGate.for_runtime(rt)
        await gate.reserve("job", "j-1", 0.75)
        await gate.settle((await gate.reserve("episode", "e-1", 0.25)).reservation_id, 0.125)
        # the process dies here: res-0 is still open and the settlement never reached the ledger
    async with open_runtime(tmp_path / "run") as rt:  # resume: the state comes back from the log
        gate = BudgetGate.for_runtime(rt)
        assert sorted(gate.state.open) == ["res-0"] and gate.state.settled == to_micros(0.125)
        with pytest.raises(BudgetRefused, match="run budget"):
            await gate.reserve("job", "j-2", 0.25)  # the open reservation still counts
        orphans = await gate.settle_orphans()
        assert [(o.reservation_id, o.usd, o.estimated) for o in orphans] == [("res-0", 0.75, True)]
        assert await gate.reserve("job", "j-2", 0.125)
    records = read_log(tmp_path / "run" / "events.jsonl").records
    assert ledger.sync("run", records) == 2  # the settlement lost to the crash, and the orphan's
    assert sum(r.usd for r in ledger.read()) == pytest.approx(0.875)


async def _concurrent_spend(
    directory: Path, plan: list[tuple[str, float, float, int]], racy: bool
) -> tuple[BudgetState, int, list[BudgetState]]:
    """Run every (episode, reserve usd, settle fraction, yields) of ``plan`` as concurrent tasks."""
    seen: list[BudgetState] = []
    async with open_runtime(directory) as rt:
        await rt.emit(BudgetSet(episode_usd=1.0, run_usd=3.0, global_usd=4.0, global_spent_before_usd=0.5))

        async def emit(body: EventBody) -> Recorded:
            if racy:  # the bug the gate prevents: a suspension between the decision and the emit
                await anyio.lowlevel.checkpoint()
            rec = await rt.emit(body)
            seen.append(msgspec.json.decode(ENC.encode(rt.state(BudgetProjection)), type=BudgetState))
            return rec

        gate = BudgetGate(emit, lambda: rt.state(BudgetProjection))
        refused = 0

        async def one(i: int, episode: str, usd: float, fraction: float, yields: int) -> None:
            nonlocal refused
            try:
                async with gate.hold("episode", f"call-{i}", usd, episode_id=episode) as h:
                    for _ in range(yields):
                        await anyio.lowlevel.checkpoint()
                    await h.settle(usd * fraction)
            except BudgetRefused:
                refused += 1

        async with anyio.create_task_group() as tg:
            for i, (episode, usd, fraction, yields) in enumerate(plan):
                tg.start_soon(one, i, episode, usd, fraction, yields)
        return rt.state(BudgetProjection), refused, seen


plans = st.lists(
    st.tuples(
        st.sampled_from(["ep-0", "ep-1", "ep-2", "ep-3"]), st.floats(0.05, 0.9), st.floats(0, 1), st.integers(0, 3)
    ),
    min_size=8,
    max_size=30,
)


@given(plans)
@settings(max_examples=15, deadline=None)
def test_concurrent_reservations_through_the_runtime_never_pass_a_cap(plan: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as d:
        final, _, seen = anyio.run(_concurrent_spend, Path(d) / "run", plan, False)
        for s in seen:  # settlements here never exceed reservations, so no overrun: committed <= cap
            assert s.overrun == 0
            assert_within_caps(s)
        assert final.open == {}
        again = replay(Path(d) / "run" / "events.jsonl", [BudgetProjection()]).states["budget"]
        assert ENC.encode(again) == ENC.encode(final)


def test_the_concurrency_test_catches_a_decision_that_is_not_atomic(tmp_path: Path) -> None:
    """Negative control: with an await between decide and emit, concurrent holds do pass the caps."""
    plan = [(f"ep-{i % 2}", 0.6, 1.0, 1) for i in range(12)]
    _, refused_ok, seen_ok = anyio.run(_concurrent_spend, tmp_path / "ok", plan, False)
    assert refused_ok > 0
    for s in seen_ok:
        assert_within_caps(s)
    _, _, seen_racy = anyio.run(_concurrent_spend, tmp_path / "racy", plan, True)
    with pytest.raises(AssertionError):
        for s in seen_racy:
            assert_within_caps(s)


# -- the stateful test ----------------------------------------------------------------------------------

RUN = "run-test"
T0 = 1_764_460_800.0
caps = st.none() | st.floats(0.0, 4.0)
EPISODES = ["", "ep-0", "ep-1", "ep-2"]


class BudgetMachine(RuleBasedStateMachine):
    """The log is a list of records; the live state folds each emit; a restart rebuilds from the log.

    Reservations stay open across many steps, so settlements, releases and new reservations interleave as
    they do for concurrent LLM calls and pods.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.log: list[Recorded] = []
        self.state = PROJ.initial()
        self.ledger = CostsLedger(self.dir / "costs.jsonl")
        self.budget = BudgetSet()

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def emit(self, body: EventBody) -> Recorded:
        rec = Recorded(len(self.log), T0 + 3600.0 * len(self.log), body)
        self.log.append(rec)
        self.state = PROJ.apply(self.state, rec)
        return rec

    def settle_and_record(self, body: CostSettled) -> None:
        self.ledger.record(RUN, self.emit(body))

    @initialize(episode=caps, run=caps, glob=caps, before=st.floats(0.0, 2.0))
    def start(self, episode: float | None, run: float | None, glob: float | None, before: float) -> None:
        self.budget = BudgetSet(episode_usd=episode, run_usd=run, global_usd=glob, global_spent_before_usd=before)
        self.emit(self.budget)

    @rule(kind=st.sampled_from(KINDS), episode=st.sampled_from(EPISODES), usd=st.just(0.0) | st.floats(0.0, 2.5))
    def reserve(self, kind: str, episode: str, usd: float) -> None:
        before = {name: committed(self.state, name, episode) for name in BUDGETS}
        limits = caps_of(self.state, episode)
        decision = reserve(self.state, kind, f"{kind}-{len(self.log)}", usd, episode_id=episode)
        self.emit(decision)
        over = {name for name, cap in limits.items() if before[name] + to_micros(usd) > cap}
        if isinstance(decision, CostReserved):
            assert not over
        else:
            assert decision.budget in over

    @precondition(lambda self: self.state.open)
    @rule(data=st.data(), factor=st.just(1.0) | st.floats(0.0, 1.6))
    def settle(self, data: st.DataObject, factor: float) -> None:
        rid = data.draw(st.sampled_from(sorted(self.state.open)))
        usd = self.state.open[rid].micros / 1e6 * factor
        self.settle_and_record(settle(self.state, rid, usd, seconds=60.0))
        with pytest.raises(UnknownReservation):  # a second settlement is refused, and emits nothing
            settle(self.state, rid, usd)

    @precondition(lambda self: self.state.open)
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.state.open)))
        self.emit(release(self.state, rid, "call failed"))

    @rule(episode=st.sampled_from(EPISODES), usd=st.floats(0.0, 0.5))
    def unreserved(self, episode: str, usd: float) -> None:
        self.settle_and_record(charge_unreserved("job", "pod-lost", usd, episode_id=episode))

    @rule(settled_unrecorded=st.booleans(), settle_orphans=st.booleans(), from_snapshot=st.booleans())
    def restart(self, settled_unrecorded: bool, settle_orphans: bool, from_snapshot: bool) -> None:
        """The process dies (maybe between a settlement and its ledger line) and a new one resumes."""
        if settled_unrecorded and self.state.open:
            rid = sorted(self.state.open)[0]
            self.emit(settle(self.state, rid, self.state.open[rid].micros / 1e6))  # logged, not in the ledger
        live = ENC.encode(self.state)
        self.log = [decode_record(encode_record(r)) for r in self.log]  # what the file gives back
        if from_snapshot:  # a snapshot half way, then the tail of the log
            half = len(self.log) // 2
            snap = PROJ.decode_state(PROJ.encode_state(PROJ.fold(self.log[:half])))
            self.state = PROJ.fold(self.log[half:], snap)
        else:
            self.state = PROJ.fold(self.log)
        assert ENC.encode(self.state) == live
        self.ledger = CostsLedger(self.dir / "costs.jsonl")
        self.ledger.sync(RUN, self.log)
        self.emit(self.budget)
        if settle_orphans:
            for body in orphan_settlements(self.state):
                self.settle_and_record(body)
            assert self.state.open == {}

    @invariant()
    def no_cap_is_passed_except_by_recorded_overrun(self) -> None:
        assert_within_caps(self.state)

    @invariant()
    def no_settled_cost_is_lost(self) -> None:
        settled = [r.event for r in self.log if isinstance(r.event, CostSettled)]
        assert self.state.settled == sum(to_micros(e.usd) for e in settled)
        assert self.state.settlements == len(settled)
        assert self.state.reserved == sum(r.micros for r in self.state.open.values())
        assert sum(self.state.settled_by_kind.values()) == self.state.settled

    @invariant()
    def the_ledger_replayed_from_the_log_equals_the_live_one(self) -> None:
        assert CostsLedger(self.dir / "costs.jsonl").read() == rows_from_log(RUN, self.log)
        assert ENC.encode(PROJ.fold(self.log)) == ENC.encode(self.state)


BudgetMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_budget_state_machine = BudgetMachine.TestCase
