"""The trainer-agent policy contract for every policy: scripted, OpenAI-compatible (against the local
OpenAI-compatible server on 127.0.0.1, and against an ``httpx.MockTransport`` API that reports prompt caching as
OpenAI does), Tinker (a fake sampler behind a real chat-template renderer), offline, and the test fake."""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from adapters.agents.openai import OpenAIConfig, OpenAIPolicy
from adapters.agents.scripted import ScriptedCall, ScriptedPolicy, ScriptedTurn, Trajectory
from adapters.openai_server import OpenAIServer, Reply
from adapters.openai_server import ScriptedPolicy as ServerScript
from adapters.openai_server import ToolCall as ServerToolCall
from adapters.retry import RetryPolicy
from adapters.tinker.offline import OfflinePolicy
from handlers.ports.policy import AgentPolicy, AgentReply, ToolCall
from tests.contracts.policy_contract import SCRIPT, PolicyContract, ScriptTurn
from tests.fakes.policy import FakePolicy

# find_spec, not importorskip: collection must not import tinker (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("tinker") is None, reason="tinker is not installed")

if TYPE_CHECKING:
    from adapters.tinker.renderer import ChatTemplateRenderer


def trajectory(script: Sequence[ScriptTurn]) -> Trajectory:
    turns = [
        ScriptedTurn(content=t.content, tool_calls=[ScriptedCall(name=c.name, arguments=c.arguments) for c in t.calls])
        for t in script
    ]
    return Trajectory(name="contract", family="calc_chain", turns=turns)


def hermes(turn: ScriptTurn) -> str:
    """What a Qwen-style model writes for ``turn``: its text, then a ``<tool_call>`` block per call."""
    calls = [f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>" for c in turn.calls]
    return "\n".join([turn.content, *calls] if turn.content else calls)


class TestScriptedPolicy(PolicyContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AsyncIterator[AgentPolicy]:
        yield ScriptedPolicy(trajectory(script))


class TestOfflinePolicy(PolicyContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AsyncIterator[AgentPolicy]:
        yield OfflinePolicy(ScriptedPolicy(trajectory(script)), sampler_version=2, sampler_path="offline:w")


class TestFakePolicy(PolicyContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AsyncIterator[AgentPolicy]:
        replies = [
            AgentReply(
                content=t.content,
                tool_calls=[
                    ToolCall(id=f"c{n}_{i}", name=c.name, arguments=json.dumps(c.arguments))
                    for i, c in enumerate(t.calls)
                ],
                finish_reason="tool_calls" if t.calls else "stop",
            )
            for n, t in enumerate(script)
        ]
        yield FakePolicy(replies)


class TestOpenAIPolicyOnTheLocalServer(PolicyContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AsyncIterator[AgentPolicy]:
        replies = [
            Reply(
                content=t.content or None,
                tool_calls=[ServerToolCall(name=c.name, arguments=json.dumps(c.arguments)) for c in t.calls],
            )
            for t in script
        ]
        async with OpenAIServer(ServerScript(replies), model_name="local-policy") as server:
            config = OpenAIConfig(model="local-policy", base_url=server.base_url, retry=RetryPolicy(max_attempts=1))
            policy = OpenAIPolicy(config, environ={"OPENAI_API_KEY": "sk-local-contract"})
            try:
                yield policy
            finally:
                await policy.aclose()


class TestOpenAIPolicyWithPromptCaching(PolicyContract):
    """An API that answers as OpenAI's does, prompt caching included: from the second call on, most of the
    prompt (the conversation so far) is a cache hit, reported in ``usage.prompt_tokens_details.cached_tokens``."""

    @asynccontextmanager
    async def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AsyncIterator[AgentPolicy]:
        turns: Iterator[tuple[int, ScriptTurn]] = iter(enumerate(script))
        previous_prompt = 0

        def answer(request: httpx.Request) -> httpx.Response:
            nonlocal previous_prompt
            body = json.loads(request.content)
            prompt = len(json.dumps(body["messages"])) // 4 + 40 * len(body["tools"])
            cached, previous_prompt = previous_prompt, prompt
            step = next(turns, None)
            if step is None:
                error = {
                    "message": "This model's maximum context length is exceeded.",
                    "code": "context_length_exceeded",
                }
                return httpx.Response(400, json={"error": error})
            n, turn = step
            calls = [
                {
                    "id": f"call_{n}{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for i, c in enumerate(turn.calls)
            ]
            message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
            if calls:
                message["tool_calls"] = calls
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": 12,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            return httpx.Response(
                200, json={"id": f"chatcmpl-{n}", "model": body["model"], "choices": [choice], "usage": usage}
            )

        config = OpenAIConfig(model="gpt-4.1-mini", base_url="https://api.openai.test/v1")
        policy = OpenAIPolicy(config, transport=httpx.MockTransport(answer), environ={"OPENAI_API_KEY": "sk-contract"})
        try:
            yield policy
        finally:
            await policy.aclose()


@functools.cache
def renderer() -> ChatTemplateRenderer:
    from adapters.tinker.renderer import ChatTemplateRenderer
    from adapters.tiny.tokenizer import train_tokenizer

    texts = [f"<|im_start|>user\nAdd 2 and 3.<|im_end|>\n{hermes(t)}" for t in SCRIPT] * 20
    tok = train_tokenizer(texts, vocab_size=400)
    return ChatTemplateRenderer(lambda: tok)


class TestTinkerPolicy(PolicyContract):
    @asynccontextmanager
    async def open(self, tmp_path: Path, script: Sequence[ScriptTurn]) -> AsyncIterator[AgentPolicy]:
        from adapters.tinker.policy import TinkerPolicy
        from tests.fakes.tinker import FakeSamplingClient

        r = renderer()
        replies = iter(script)

        def sample(prompt_ids: list[int]) -> list[int]:
            turn = next(replies, None)
            if turn is None:
                raise RuntimeError("the sampler is gone")  # what the SDK raises after its own retries
            ids: list[int] = r.tokenizer(hermes(turn), add_special_tokens=False)["input_ids"]
            return ids + r.stop_tokens()[:1]

        sampler = FakeSamplingClient("tinker://fake/sampler/step_000002", sample)
        yield TinkerPolicy(model="Qwen/Qwen3-8B", renderer=r, sampler=sampler, sampler_version=2)
