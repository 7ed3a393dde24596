"""The OpenAI-compatible policy against httpx.MockTransport: parsing, retries, and the key kept secret."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from adapters.agents.openai import OpenAIConfig, OpenAIPolicy
from adapters.retry import RetryPolicy
from handlers.ports.policy import PolicyError

KEY = "sk-test-SECRET-0123456789"


def _completion(**message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 100}},
    }


def _policy(handler: Any, sleeps: list[float] | None = None) -> OpenAIPolicy:
    async def sleep(s: float) -> None:
        if sleeps is not None:
            sleeps.append(s)

    return OpenAIPolicy(
        OpenAIConfig(model="gpt-4.1-mini", base_url="http://llm.test/v1", retry=RetryPolicy(max_attempts=3)),
        transport=httpx.MockTransport(handler),
        environ={"OPENAI_API_KEY": KEY},
        sleep=sleep,
        rand=lambda: 0.5,
    )


def test_parses_tool_calls_and_usage() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        assert request.headers["authorization"] == f"Bearer {KEY}"
        call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}
        return httpx.Response(200, json=_completion(content=None, tool_calls=[call]))

    reply = anyio.run(_policy(handler).next_turn, [{"role": "user", "content": "hi"}], [{"type": "function"}])
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("c1", "read_file", '{"path": "x"}')]
    assert (reply.input_tokens, reply.cached_input_tokens, reply.output_tokens) == (120, 100, 30)
    assert seen[0]["model"] == "gpt-4.1-mini" and seen[0]["tools"] == [{"type": "function"}]


def test_retries_429_with_retry_after_and_5xx_with_backoff() -> None:
    codes = iter([429, 503, 200])
    sleeps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        code = next(codes)
        if code == 200:
            return httpx.Response(200, json=_completion(content="done"))
        return httpx.Response(code, headers={"Retry-After": "7"} if code == 429 else {}, text="busy")

    reply = anyio.run(_policy(handler, sleeps).next_turn, [], [])
    assert reply.content == "done"
    assert sleeps[0] == 7.0 and 0 < sleeps[1] <= 2.0


def test_gives_up_after_bounded_attempts_and_never_leaks_the_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="boom")

    with capture_logs() as logs, pytest.raises(PolicyError, match="giving up after 3 attempts") as info:
        anyio.run(_policy(handler).next_turn, [], [])
    assert KEY not in str(info.value) and KEY not in repr(logs)


def test_auth_failure_names_the_variable_not_the_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"bad key {KEY}"}})

    with pytest.raises(PolicyError, match="OPENAI_API_KEY") as info:
        anyio.run(_policy(handler).next_turn, [], [])
    assert KEY not in str(info.value)


def test_malformed_reply_and_missing_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": "nope"})

    with pytest.raises(PolicyError, match="malformed chat completion"):
        anyio.run(_policy(handler).next_turn, [], [])
    with pytest.raises(PolicyError, match="set the environment variable OPENAI_API_KEY"):
        OpenAIPolicy(OpenAIConfig(model="m"), environ={})


def test_malformed_tool_arguments_are_kept_raw_for_the_tools_to_refuse() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        call = {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": '{"path": '}}
        return httpx.Response(200, json=_completion(content="", tool_calls=[call]))

    reply = anyio.run(_policy(handler).next_turn, [], [])
    assert reply.tool_calls[0].arguments == '{"path": '
