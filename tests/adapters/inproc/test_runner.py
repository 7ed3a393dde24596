"""In-process rollouts of verifiers v1 envs (adapters.inproc), with the real verifiers 0.4.0.

Envs: the reference training env in fixtures/envs/family_reference (shared toolset, per-rollout state in
verifiers' state channel) and small tasksets in counter_env.py (a per-rollout toolset, stop hooks, a reward
that raises, a reward that needs a runtime). Parity with real ``vf-eval`` is in test_parity.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.openai_server import ChatRequest, NonsensePolicy, ReferencePolicy, Reply, ScriptedPolicy, ToolCall
from families import get_family

# find_spec, not importorskip: collection must not import verifiers (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")

if TYPE_CHECKING:
    from adapters.inproc import InprocEnv

ROOT = Path(__file__).resolve().parents[3]
REFERENCE_ENV = ROOT / "fixtures" / "envs" / "family_reference"


def reference_env(family: str, n: int) -> InprocEnv:
    from adapters.inproc import load_env

    return load_env("family-reference", path=REFERENCE_ENV, config={"family": family, "num_tasks": n})


def train_tasks(family: str, n: int) -> list[Any]:
    fam = get_family(family)
    return [fam.generate("train", s) for s in range(n)]


async def test_reference_solver_scores_1_and_nonsense_0_in_task_repeat_order() -> None:
    from adapters.inproc import InprocRunner, RolloutSettings

    env = reference_env("calc_chain", 3)
    tasks = env.tasks()
    fam = get_family("calc_chain")
    solved = train_tasks("calc_chain", 3)
    async with InprocRunner(env, ReferencePolicy(fam, solved), RolloutSettings(max_turns=10)) as runner:
        good = await runner.run(tasks, group_size=2)
    async with InprocRunner(env, NonsensePolicy()) as runner:
        bad = await runner.run(tasks, group_size=2)
    assert [r.task_key for r in good] == [t.key for t in tasks for _ in range(2)]
    for i, result in enumerate(good):
        steps = sum(1 for s in fam.solve(solved[i // 2]) if s.tool is not None)
        assert (result.reward, result.ok, result.stop_condition) == (1.0, True, "agent_completed")
        assert result.metrics["tool_calls"] == steps and result.num_turns == steps + 1
    assert [(r.reward, r.num_turns, r.ok) for r in bad] == [(0.0, 1, True)] * 6
    assert len({r.session_id for r in good + bad}) == 12  # one trace (session) per rollout


async def test_stateful_tools_stay_per_rollout_under_concurrency() -> None:
    # ledger tools change balances; every concurrent rollout must see only its own calls.
    from adapters.inproc import InprocRunner, RolloutSettings

    env = reference_env("ledger", 6)
    policy = ReferencePolicy(get_family("ledger"), train_tasks("ledger", 6))
    async with InprocRunner(env, policy, RolloutSettings(max_turns=20)) as runner:
        results = await runner.run(env.tasks(), group_size=3)
    assert [r.reward for r in results] == [1.0] * 18
    assert policy.mismatches == []  # every tool result was what the family's own tools return


async def test_a_policy_failure_is_a_provider_error_on_the_trace_not_an_exception() -> None:
    from adapters.inproc import InprocRunner

    class Broken:
        async def respond(self, request: ChatRequest) -> Reply:
            raise RuntimeError("model fell over")

    env = reference_env("calc_chain", 1)
    async with InprocRunner(env, Broken()) as runner:
        (result,) = await runner.run(env.tasks())
    assert (result.ok, result.stop_condition, result.reward) == (False, "provider_error", 0.0)
    assert "model fell over" in result.errors[0]
    assert result.trace.calls[0].error is not None


async def test_sampling_and_model_reach_the_policy_with_the_session_id() -> None:
    from adapters.inproc import InprocRunner, RolloutSettings

    seen: list[ChatRequest] = []

    class Recorder:
        async def respond(self, request: ChatRequest) -> Reply:
            seen.append(request)
            return Reply(content="<answer>0</answer>")

    env = reference_env("calc_chain", 1)
    settings_ = RolloutSettings(model="tiny-0.6b", sampling={"temperature": 0.7, "max_tokens": 64})
    async with InprocRunner(env, Recorder(), settings_) as runner:
        (result,) = await runner.run(env.tasks())
    (request,) = seen
    assert (request.model, request.temperature, request.max_tokens) == ("tiny-0.6b", 0.7, 64)
    assert request.stream and request.include_usage and request.session_id == result.session_id
    assert [m.role for m in request.messages] == ["system", "user"]
    assert sorted(request.tool_names) == sorted(s["function"]["name"] for s in get_family("calc_chain").tool_schemas())


# --- small envs (counter_env.py): a per-rollout toolset, stop hooks, failing and runtime-bound rewards ---


def counter_env(task: str = "CounterTask") -> InprocEnv:
    """The counter env with ``task`` (a class name in counter_env.py) as its task type."""
    from tests.adapters.inproc import counter_env as envs

    return envs.counter_env(getattr(envs, task))


def bump_then_answer(bumps: list[int], answer: str) -> ScriptedPolicy:
    replies: list[Reply | str] = [
        Reply(tool_calls=[ToolCall(name="counter_bump", arguments=json.dumps({"k": k}))]) for k in bumps
    ]
    return ScriptedPolicy([*replies, answer])


async def test_per_rollout_toolset_gets_its_task_and_weighted_reward() -> None:
    from adapters.inproc import InprocRunner

    env = counter_env()
    task = env.tasks()[0]  # start 1, target 6
    async with InprocRunner(env, bump_then_answer([2, 3], "6")) as runner:
        result = await runner.rollout(task)
    tool_results = [m.content for m in result.trace.tool_messages]
    assert tool_results == ["3", "6"]
    assert (result.rewards, result.reward, result.stop_condition) == ({"reached": 1.0}, 2.0, "agent_completed")


async def test_a_stop_hook_ends_the_rollout_and_it_is_still_scored() -> None:
    from adapters.inproc import InprocRunner

    env = counter_env()
    async with InprocRunner(env, bump_then_answer([1, 1, 1, 1], "9")) as runner:
        result = await runner.rollout(env.tasks()[0])
    # A stop sees the committed graph: the 3rd tool result enters it with the 4th turn, so the 5th is refused.
    assert (result.stop_condition, result.ok, result.num_turns) == ("too_many_tools", True, 4)
    assert result.rewards == {"reached": 0.0}


async def test_a_turn_limit_stops_the_rollout() -> None:
    from adapters.inproc import InprocRunner, RolloutSettings

    env = counter_env()
    async with InprocRunner(env, bump_then_answer([1, 1], "4"), RolloutSettings(max_turns=2)) as runner:
        result = await runner.rollout(env.tasks()[0])
    assert (result.stop_condition, result.ok, result.num_turns) == ("max_turns", True, 2)


async def test_a_raising_reward_voids_every_reward_of_the_trace() -> None:
    from adapters.inproc import InprocRunner

    env = counter_env("ExplodingTask")
    async with InprocRunner(env, bump_then_answer([5], "6")) as runner:
        result = await runner.rollout(env.tasks()[0])
    assert result.ok is False and result.rewards == {"reached": None, "explode": None}
    assert "reward exploded" in result.errors[0] and result.errors[0].startswith("TaskError")


async def test_a_reward_that_needs_a_runtime_is_refused_before_any_rollout() -> None:
    from adapters.inproc import EnvLoadError, InprocRunner

    env = counter_env("RuntimeTask")
    async with InprocRunner(env, NonsensePolicy()) as runner:
        with pytest.raises(EnvLoadError, match="needs_files need a runtime"):
            await runner.run(env.tasks())


def test_load_errors_name_the_env_and_the_cause(tmp_path: Path) -> None:
    from adapters.inproc import EnvLoadError, load_env

    with pytest.raises(EnvLoadError, match=r"'no-such-env'.*not found"):
        load_env("no-such-env")
    with pytest.raises(EnvLoadError, match="num_taskz"):
        load_env("family-reference", path=REFERENCE_ENV, config={"num_taskz": 3})
    with pytest.raises(EnvLoadError, match="no module 'family_reference'"):
        load_env("family-reference", path=tmp_path)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pairs=st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), max_size=4),
    answer=st.sampled_from(["right", "wrong", "untagged"]),
)
def test_any_call_sequence_gives_a_linear_trace_with_the_tools_results(
    pairs: list[tuple[int, int]], answer: str
) -> None:
    from adapters.inproc import InprocRunner

    env = reference_env("calc_chain", 1)
    (task,) = env.tasks()
    gold = task.data.answer
    text = {"right": f"<answer>{gold}</answer>", "wrong": f"<answer>{int(gold) + 1}</answer>", "untagged": gold}
    replies: list[Reply | str] = [
        Reply(tool_calls=[ToolCall(name="add", arguments=json.dumps({"a": a, "b": b}))]) for a, b in pairs
    ]

    async def go() -> Any:
        async with InprocRunner(env, ScriptedPolicy([*replies, text[answer]])) as runner:
            return await runner.rollout(task)

    result = asyncio.run(go())
    trace = result.trace
    assert result.num_turns == len(pairs) + 1
    assert [n.parent for n in trace.nodes] == [None, *range(len(trace.nodes) - 1)]  # one branch
    assert [m.content for m in trace.tool_messages] == [str(a + b) for a, b in pairs]
    assert result.reward == (0.0 if answer == "wrong" else 1.0)


async def test_per_rollout_seeds_reach_the_policy_and_must_match_the_rollout_count() -> None:
    from adapters.inproc import InprocRunner

    seen: dict[str | None, int | None] = {}

    class Recorder:
        async def respond(self, request: ChatRequest) -> Reply:
            seen[request.session_id] = request.seed
            return Reply(content="<answer>0</answer>")

    env = reference_env("calc_chain", 2)
    async with InprocRunner(env, Recorder()) as runner:
        results = await runner.run(env.tasks(), group_size=2, seeds=[11, 12, 13, 14])
        with pytest.raises(ValueError, match="3 seeds for 4 rollouts"):
            await runner.run(env.tasks(), group_size=2, seeds=[1, 2, 3])
    assert [seen[r.session_id] for r in results] == [11, 12, 13, 14]
