"""The offline backend: a learner that checks datum alignment, counts and checkpoints (restorable with its
optimizer counters), and a policy whose toy token ids make one datum per episode with logprobs that depend on
the tokens only (its weights never change)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.tinker.offline import OfflineLearner, OfflinePolicy, render_tokens
from handlers.training import DatumSpec, trajectory_to_datums
from handlers.training.episodes import turn_from_training
from tests.fakes.policy import FakePolicy


def _datum(n: int) -> DatumSpec:
    return DatumSpec(
        input_tokens=list(range(n)),
        target_tokens=list(range(1, n + 1)),
        logprobs=[-0.1] * n,
        advantages=[0.5] * n,
        mask=[1.0] * n,
    )


async def test_learner_checkpoints_restore_its_counters(tmp_path: Path) -> None:
    learner = OfflineLearner(tmp_path)
    out = await learner.train_step([_datum(4), _datum(3)], loss_fn="ppo", loss_fn_config=None, learning_rate=1e-5)
    assert out.metrics["loss:sum"] == pytest.approx(-3.5)
    state, sampler = await learner.save("step_000001", with_state=True)
    assert state.startswith("offline:") and (tmp_path / "checkpoints" / "step_000001.state.json").is_file()
    assert sampler.endswith(".sampler.json")
    assert (await learner.save("step_000002", with_state=False))[0] == ""
    again = OfflineLearner(tmp_path, resume_state_path=state)
    assert (again.state.steps, again.state.adam_steps, again.state.datums, again.state.tokens) == (1, 1, 2, 7)
    with pytest.raises(ValueError, match="not an offline checkpoint"):
        OfflineLearner(tmp_path, resume_state_path="tinker://x")


async def test_learner_refuses_misaligned_datums(tmp_path: Path) -> None:
    bad = DatumSpec(input_tokens=[1, 2], target_tokens=[2], logprobs=[0.0, 0.0], advantages=[0.0, 0.0], mask=[1.0, 1.0])
    with pytest.raises(ValueError, match="target_tokens has 1 entries for 2"):
        await OfflineLearner(tmp_path).train_step([bad], loss_fn="ppo", loss_fn_config=None, learning_rate=1.0)


async def test_policy_turns_extend_their_prompts_into_one_datum() -> None:
    tools = [{"type": "function", "function": {"name": "list_files"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    turns, versions = [], set()
    for version in (0, 3):
        policy = OfflinePolicy(FakePolicy(), sampler_version=version)
        convo = list(messages)
        got = []
        for _ in range(3):
            reply = await policy.next_turn(convo, tools)
            turn, v = turn_from_training(reply.training)
            got.append(turn)
            versions.add(v)
            convo.append(reply.message())
            convo.append({"role": "tool", "tool_call_id": "c", "name": "list_files", "content": "a\nb"})
        assert got[0].prompt_tokens == render_tokens(messages, tools)
        turns.append(got)
    assert versions == {0, 3}
    assert turns[0] == turns[1]  # the offline "weights" never change: same tokens, same logprobs
    datums = trajectory_to_datums(turns[0], 1.0)
    assert len(datums) == 1 and datums[0].n_trained == sum(len(t.sampled_tokens) for t in turns[0])
