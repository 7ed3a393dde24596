"""Policies of the local server: the reference policy solves every family by driving its tools."""

from __future__ import annotations

import json

import msgspec
import pytest

from adapters.openai_server import (
    ChatRequest,
    Message,
    MessageToolCall,
    NonsensePolicy,
    PolicyError,
    ReferencePolicy,
    Reply,
    ScriptedPolicy,
)
from adapters.openai_server._protocol import FunctionCall
from families import FAMILIES, SYSTEM_PROMPT, Family, Task, get_family, hidden_tasks

N_TASKS = 25  # per family; the hidden set has 200, which the family tests cover


def family_or_skip(name: str) -> Family:
    try:
        return get_family(name)
    except ModuleNotFoundError as exc:  # a family not written yet
        pytest.skip(f"family {name} not available: {exc}")


def request(messages: list[Message]) -> ChatRequest:
    return ChatRequest(model="m", messages=messages)


async def run_episode(policy: ReferencePolicy | NonsensePolicy, family: Family, task: Task) -> tuple[str, int]:
    """Play a chat loop as the verifiers null harness does; returns (final reply, tool calls made)."""
    box = family.tools(task)
    messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.prompt)]
    for turn in range(64):
        reply = await policy.respond(request(messages))
        if not reply.tool_calls:
            return reply.content or "", turn
        (call,) = reply.tool_calls
        call_id = f"c{turn}"
        messages.append(
            Message(
                role="assistant",
                content="",
                tool_calls=[
                    MessageToolCall(id=call_id, function=FunctionCall(name=call.name, arguments=call.arguments))
                ],
            )
        )
        result = box.call(call.name, json.loads(call.arguments))
        messages.append(Message(role="tool", tool_call_id=call_id, content=result))
    raise AssertionError("the policy never answered")


@pytest.mark.parametrize("name", list(FAMILIES))
async def test_reference_policy_solves_tasks_by_calling_tools(name: str) -> None:
    family = family_or_skip(name)
    tasks = list(hidden_tasks(family))[:N_TASKS]
    policy = ReferencePolicy(family, tasks)
    for task in tasks:
        answer, calls = await run_episode(policy, family, task)
        assert family.score(task, answer) == 1.0, task.id
        assert calls == sum(1 for s in family.solve(task) if s.tool is not None)
    assert policy.mismatches == []


@pytest.mark.parametrize("name", list(FAMILIES))
async def test_nonsense_policy_scores_zero(name: str) -> None:
    family = family_or_skip(name)
    for task in list(hidden_tasks(family))[:N_TASKS]:
        answer, calls = await run_episode(NonsensePolicy(), family, task)
        assert calls == 0
        assert family.score(task, answer) == 0.0, task.id


async def test_reference_policy_records_tool_results_that_differ_from_the_solver() -> None:
    family = get_family("calc_chain")
    task = hidden_tasks(family)[0]
    first = family.solve(task)[0]
    policy = ReferencePolicy(family, [task])
    messages = [
        Message(role="user", content=task.prompt),
        Message(
            role="assistant",
            tool_calls=[MessageToolCall(id="c0", function=FunctionCall(name=first.tool or "", arguments="{}"))],
        ),
        Message(role="tool", tool_call_id="c0", content="-12345"),
    ]
    await policy.respond(request(messages))
    (mismatch,) = policy.mismatches
    assert (mismatch.task_id, mismatch.step, mismatch.got, mismatch.expected) == (task.id, 0, "-12345", first.result)


async def test_reference_policy_finds_a_prompt_wrapped_in_more_text_and_rejects_unknown_ones() -> None:
    family = get_family("calc_chain")
    tasks = list(hidden_tasks(family))[:5]
    policy = ReferencePolicy(family, tasks)
    wrapped = request([Message(role="user", content=f"Please help.\n\n{tasks[3].prompt}\n\nThanks!")])
    assert policy.identify(wrapped).id == tasks[3].id
    with pytest.raises(PolicyError, match="no known task"):
        await policy.respond(request([Message(role="user", content="What is the meaning of life?")]))
    with pytest.raises(PolicyError, match="no user message"):
        await policy.respond(request([Message(role="system", content="x")]))


async def test_reference_policy_tells_apart_tasks_that_share_a_prompt() -> None:
    """Ledger prompts never show the balances: two worlds, one prompt; the tool results decide."""
    family = get_family("ledger")
    task = hidden_tasks(family)[0]
    world = {**task.world, "balances": {k: v + 7 for k, v in task.world["balances"].items()}}
    twin = msgspec.structs.replace(task, id="ledger/twin/0", world=world)
    twin = msgspec.structs.replace(twin, answer=next(s.answer for s in family.solve(twin) if s.answer))
    assert twin.answer != task.answer
    policy = ReferencePolicy(family, [task, twin])
    for which in (task, twin):
        answer, _ = await run_episode(policy, family, which)
        assert family.score(which, answer) == 1.0, which.id
    assert policy.mismatches == []


async def test_reference_policy_on_hidden_tasks_with_shared_prompts() -> None:
    """Real collisions (multi_hop asks the same question over different worlds) are solved too."""
    for name in FAMILIES:
        try:
            family = get_family(name)
        except ModuleNotFoundError:
            continue
        tasks = hidden_tasks(family)
        groups: dict[str, list[Task]] = {}
        for task in tasks:
            groups.setdefault(task.prompt, []).append(task)
        policy = ReferencePolicy(family, tasks)
        for task in (t for group in groups.values() if len(group) > 1 for t in group):
            answer, _ = await run_episode(policy, family, task)
            assert family.score(task, answer) == 1.0, task.id
        assert policy.mismatches == []


def test_reference_policy_needs_tasks() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        ReferencePolicy(get_family("calc_chain"), [])


async def test_scripted_policy_plays_in_order_then_stops_or_cycles() -> None:
    req = request([Message(role="user", content="hi")])
    once = ScriptedPolicy(["a", Reply(content="b")])
    assert [(await once.respond(req)).content for _ in range(2)] == ["a", "b"]
    with pytest.raises(PolicyError, match="exhausted"):
        await once.respond(req)
    looped = ScriptedPolicy(["a", "b"], cycle=True)
    assert [(await looped.respond(req)).content for _ in range(5)] == ["a", "b", "a", "b", "a"]
