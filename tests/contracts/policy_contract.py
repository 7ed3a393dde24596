"""The trainer-agent policy contract: what every :class:`~handlers.ports.policy.AgentPolicy` promises the episode.

A subclass supplies :meth:`PolicyContract.open`: a policy arranged so that its model "says" the turns of a
script in order (a recorded trajectory, a scripted server, a sampler whose replies are the script's text) and
can say nothing after the last one.

The promises:

- a reply carries the model's text and tool calls exactly: each call's name, and its arguments as JSON text;
- every tool call has an id, unique within the episode (the tool results point back at it), and
  ``finish_reason`` is ``tool_calls`` exactly when there are calls;
- ``reply.message()`` is an OpenAI assistant message that goes back into the conversation for the next turn;
- token counts are non-negative, and ``input_tokens`` counts every prompt token, ``cached_input_tokens`` the
  cache hits among them (the price table bills them so: see ``handlers/budget/prices.py``);
- a trainable reply's ``training`` record is one the learner reads (``turn_from_training``), its token counts
  are its token lists' lengths;
- a policy that cannot produce a turn raises :class:`~handlers.ports.policy.PolicyError`, nothing else.
"""

from __future__ import annotations

import abc
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from handlers.ports.policy import AgentPolicy, AgentReply, PolicyError
from handlers.training.episodes import turn_from_training

__all__ = ["SCRIPT", "TOOLS", "PolicyContract", "ScriptCall", "ScriptTurn"]


class ScriptCall(msgspec.Struct, frozen=True):
    name: str
    arguments: dict[str, Any]


class ScriptTurn(msgspec.Struct, frozen=True):
    content: str = ""
    calls: tuple[ScriptCall, ...] = ()


def _tool(name: str, **params: str) -> dict[str, Any]:
    props = {k: {"type": v} for k, v in params.items()}
    return {"type": "function", "function": {"name": name, "description": "", "parameters": {"properties": props}}}


TOOLS = [_tool("add", a="integer", b="integer"), _tool("list_files")]

#: what the model says: a call, two calls in one turn, then the final text
SCRIPT = (
    ScriptTurn(calls=(ScriptCall("add", {"a": 2, "b": 3}),)),
    ScriptTurn(calls=(ScriptCall("list_files", {}), ScriptCall("add", {"a": 5, "b": 1}))),
    ScriptTurn(content="The answer is 6."),
)

Episode = list[AgentReply]


async def play(policy: AgentPolicy) -> tuple[Episode, list[dict[str, Any]]]:
    """The script played as an episode: each reply, and a result per tool call, go back into the conversation."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Add 2 and 3, look around, then add 5 and 1."},
    ]
    replies = []
    for _ in SCRIPT:
        reply = await policy.next_turn(messages, TOOLS)
        replies.append(reply)
        messages.append(reply.message())
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in reply.tool_calls]
    return replies, messages


class PolicyContract(abc.ABC):
    @abc.abstractmethod
    def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AbstractAsyncContextManager[AgentPolicy]:
        """A policy whose model says ``script``'s turns in order, and cannot answer once they are said."""

    @pytest.fixture
    async def policy(self, tmp_path: Path) -> AsyncIterator[AgentPolicy]:
        async with self.open(tmp_path, SCRIPT) as policy:
            yield policy

    @pytest.fixture
    async def episode(self, policy: AgentPolicy) -> Episode:
        return (await play(policy))[0]

    # ---- the promises ------------------------------------------------------------------------------

    async def test_it_names_itself_and_its_model(self, policy: AgentPolicy) -> None:
        assert isinstance(policy.name, str) and policy.name.strip()
        assert isinstance(policy.model, str) and policy.model.strip()

    async def test_replies_carry_the_models_text_and_tool_calls(self, episode: Episode) -> None:
        for turn, reply in zip(SCRIPT, episode, strict=True):
            assert isinstance(reply, AgentReply)
            assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
                (c.name, c.arguments) for c in turn.calls
            ]
            assert all(isinstance(c.arguments, str) for c in reply.tool_calls)
            assert reply.content.strip() == turn.content

    async def test_tool_call_ids_are_unique_within_the_episode(self, episode: Episode) -> None:
        ids = [c.id for r in episode for c in r.tool_calls]
        assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids) == 3, ids

    async def test_finish_reason_says_whether_there_are_tool_calls(self, episode: Episode) -> None:
        for reply in episode:
            assert (reply.finish_reason == "tool_calls") == bool(reply.tool_calls), reply

    async def test_the_reply_goes_back_as_an_openai_assistant_message(self, episode: Episode) -> None:
        for reply in episode:
            msg = reply.message()
            assert msg["role"] == "assistant" and isinstance(msg["content"], str)
            for call, wire in zip(reply.tool_calls, msg.get("tool_calls", []), strict=True):
                assert wire == {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            assert json.loads(json.dumps(msg)) == msg

    async def test_token_counts_count_every_prompt_token_and_the_cached_among_them(self, episode: Episode) -> None:
        for reply in episode:
            counts = (reply.input_tokens, reply.cached_input_tokens, reply.output_tokens)
            assert all(isinstance(n, int) and n >= 0 for n in counts), counts
            assert reply.cached_input_tokens <= reply.input_tokens, counts

    async def test_a_training_record_is_one_the_learner_reads(self, episode: Episode) -> None:
        for reply in episode:
            if reply.training:
                turn, _version = turn_from_training(reply.training)
                assert reply.input_tokens == len(turn.prompt_tokens)
                assert reply.output_tokens == len(turn.sampled_tokens)

    async def test_a_policy_that_cannot_answer_raises_policy_error(self, policy: AgentPolicy) -> None:
        _, messages = await play(policy)
        messages.append({"role": "user", "content": "And now?"})
        with pytest.raises(PolicyError):
            await policy.next_turn(messages, TOOLS)
