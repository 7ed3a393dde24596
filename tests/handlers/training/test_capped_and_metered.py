"""Capped episodes stay out of the GRPO batch; each learner step is paid for as a ``training`` cost and replays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine.replay import replay
from engine.runtime import Runtime
from events import Recorded
from events.learning import BatchCollected, GroupStarted, LoRAStepApplied
from events.money import BudgetSet, CostRefused, CostReserved, CostSettled
from handlers.budget.prices import load_prices
from handlers.budget.rules import BudgetGate, BudgetRefused
from handlers.budget.training_cost import step_train_tokens
from handlers.registry import default_projections
from handlers.training import EpisodeGroup, FinishedEpisode, SampledTurn, learner_step, parse_config
from handlers.training.meter import GateMeter
from handlers.training.projection import TrainingProjection
from handlers.training.step import BatchAllCapped, build_batch_datums
from tests.handlers.training.test_step import RecordingLearner

MODEL = "Qwen/Qwen3.6-35B-A3B"


def _group(task: str, rewards: list[float], capped: set[int] = frozenset()) -> EpisodeGroup:  # type: ignore[assignment]
    return EpisodeGroup(
        task_id=task,
        episodes=[
            FinishedEpisode(
                episode_id=f"{task}-e{i}",
                task_id=task,
                sampler_version=0,
                reward=r,
                turns=[SampledTurn(prompt_tokens=[1, 2, 3], sampled_tokens=[4, 5], sampled_logprobs=[-0.1, -0.2])],
                capped=i in capped,
            )
            for i, r in enumerate(rewards)
        ],
    )


async def test_capped_episodes_are_left_out_of_the_batch_and_of_their_groups_baseline() -> None:
    events: list[Any] = []

    async def emit(body: Any) -> None:
        events.append(body)

    learner = RecordingLearner()
    # The capped episode's 1.0 would lift the group mean to 2/3; without it the mean of [0, 1] is 0.5.
    batch = [_group("a", [1.0, 0.0, 1.0], capped={0})]
    await learner_step(learner, batch, step=0, config=parse_config({}), emit=emit)
    [(datums, *_)] = learner.steps
    assert sorted(round(d.advantages[-1], 6) for d in datums) == [-0.5, 0.5]
    collected = next(e for e in events if isinstance(e, BatchCollected))
    assert collected.episode_ids == ["a-e1", "a-e2"] and collected.capped_episode_ids == ["a-e0"]
    applied = next(e for e in events if isinstance(e, LoRAStepApplied))
    assert applied.n_episodes == 2

    # The training projection closes the group (capped member included) and counts the capped episode.
    started = GroupStarted(group_id="g0", task_id="a", episode_ids=["a-e0", "a-e1", "a-e2"], sampler_version=0)
    records = [Recorded(i, float(i), body) for i, body in enumerate([started, collected, applied])]
    state = TrainingProjection().fold(records)
    assert state.groups["g0"].status == "trained" and state.capped_episodes == 1


async def test_a_batch_of_capped_episodes_only_trains_nothing() -> None:
    events: list[Any] = []

    async def emit(body: Any) -> None:
        events.append(body)

    learner = RecordingLearner()
    with pytest.raises(BatchAllCapped, match="budget cap"):
        await learner_step(
            learner, [_group("a", [1.0, 0.0], capped={0, 1})], step=0, config=parse_config({}), emit=emit
        )
    assert learner.steps == []
    assert [type(e) for e in events] == [BatchCollected]


async def _metered_run(tmp_path: Path, run_usd: float) -> tuple[list[Any], RecordingLearner, int, bool]:
    learner = RecordingLearner()
    batch = [_group("a", [1.0, 0.0]), _group("b", [0.0, 1.0])]
    tokens = step_train_tokens(build_batch_datums(batch))
    refused = False
    async with Runtime(tmp_path, default_projections()) as rt:
        await rt.emit(BudgetSet(run_usd=run_usd))
        meter = GateMeter(BudgetGate.for_runtime(rt, load_prices()), MODEL)
        try:
            await learner_step(learner, batch, step=0, config=parse_config({}), emit=rt.emit, meter=meter)
        except BudgetRefused:
            refused = True
    return [rec.event for rec in _records(tmp_path)], learner, tokens, refused


def _records(path: Path) -> list[Recorded]:
    from engine.log import read_log

    return read_log(path / "events.jsonl").records


async def test_a_learner_step_is_charged_as_training_at_the_models_train_price(tmp_path: Path) -> None:
    bodies, learner, tokens, refused = await _metered_run(tmp_path, run_usd=5.0)
    assert not refused
    assert len(learner.steps) == 1
    # Every input position of every datum: 2 groups x 2 episodes x (3 prompt + 2 sampled - 1) positions.
    assert tokens == 4 * 4
    reserved = next(b for b in bodies if isinstance(b, CostReserved))
    settled = next(b for b in bodies if isinstance(b, CostSettled))
    expected = tokens * load_prices().model(MODEL).train_per_mtok / 1e6
    assert expected > 0
    assert (reserved.kind, reserved.ref, reserved.item) == ("training", "step-0", MODEL)
    assert (settled.kind, settled.train_tokens, settled.estimated) == ("training", tokens, False)
    assert settled.usd == pytest.approx(expected) and settled.price_version == load_prices().label
    # Paid for before the step ran, settled after it, before the step is recorded as applied.
    order = [type(b).__name__ for b in bodies if not isinstance(b, BudgetSet)]
    assert order.index("CostReserved") < order.index("CostSettled") < order.index("LoRAStepApplied")

    # A replay re-prices it from the recorded tokens; a tampered amount is listed.
    assert replay(tmp_path / "events.jsonl", default_projections(), verify=True).mismatches == []
    path = tmp_path / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    from events.codec import RecordCodec

    codec = RecordCodec()
    for i, line in enumerate(lines):
        rec = codec.decode(line)
        if isinstance(rec.event, CostSettled):
            lines[i] = codec.encode(Recorded(rec.seq, rec.ts, msgspec.structs.replace(rec.event, usd=1.0)))
    path.write_bytes(b"".join(lines))
    [mismatch] = replay(path, default_projections(), verify=True).mismatches
    assert mismatch.type == "cost.settled" and mismatch.fields["usd"] == (1.0, pytest.approx(expected))


async def test_a_step_the_run_cap_cannot_cover_is_refused_before_it_runs(tmp_path: Path) -> None:
    bodies, learner, _tokens, refused = await _metered_run(tmp_path, run_usd=1e-9)
    assert refused and learner.steps == []
    refused = next(b for b in bodies if isinstance(b, CostRefused))
    assert (refused.kind, refused.budget) == ("training", "run")
    assert not any(isinstance(b, LoRAStepApplied) for b in bodies)


async def test_a_free_learner_is_recorded_even_past_a_spent_cap(tmp_path: Path) -> None:
    """The offline learner's steps cost nothing: a run cap already spent does not refuse them, and the ledger
    still gets their tokens (kind training, $0)."""
    learner = RecordingLearner()
    batch = [_group("a", [1.0, 0.0])]
    async with Runtime(tmp_path, default_projections()) as rt:
        await rt.emit(BudgetSet(run_usd=0.0))
        meter = GateMeter(BudgetGate.for_runtime(rt, load_prices()), "offline")
        await learner_step(learner, batch, step=0, config=parse_config({}), emit=rt.emit, meter=meter)
    bodies = [r.event for r in _records(tmp_path)]
    [settled] = [b for b in bodies if isinstance(b, CostSettled)]
    assert (settled.kind, settled.usd, settled.item, settled.reservation_id) == ("training", 0.0, "offline", "")
    assert settled.train_tokens == step_train_tokens(build_batch_datums(batch)) > 0
    assert len(learner.steps) == 1 and not any(isinstance(b, (CostReserved, CostRefused)) for b in bodies)
