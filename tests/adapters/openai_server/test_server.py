"""Protocol tests of the local OpenAI-compatible server, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from adapters.openai_server import (
    DONE,
    ChatRequest,
    OpenAIServer,
    Reply,
    ScriptedPolicy,
    ToolCall,
    Usage,
)

USER = [{"role": "user", "content": "What is 2 + 3?"}]


def sse_events(body: str) -> list[Any]:
    """The decoded ``data:`` payloads of an SSE body (``[DONE]`` kept as the string)."""
    events: list[Any] = []
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block.removeprefix("data: ")
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


async def post(server: OpenAIServer, body: Any, **kw: Any) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await client.post(f"{server.base_url}/chat/completions", content=content, **kw)


async def test_stream_text_reply_chunk_sequence() -> None:
    async with OpenAIServer(ScriptedPolicy(["5"])) as server:
        body = {"model": "m1", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}
        resp = await post(server, body)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert resp.text.endswith(DONE.decode())
    events = sse_events(resp.text)
    role, content, finish, usage, done = events
    assert done == "[DONE]"
    for chunk in (role, content, finish, usage):
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "m1"
        assert chunk["id"] == role["id"]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["choices"][0]["finish_reason"] is None
    assert content["choices"][0]["delta"] == {"content": "5"}
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert usage["choices"] == []
    u = usage["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["prompt_tokens"] > 0


async def test_stream_tool_call_deltas() -> None:
    calls = [ToolCall(name="add", arguments='{"a": 2, "b": 3}'), ToolCall(name="mul", arguments='{"a": 5, "b": 2}')]
    async with OpenAIServer(ScriptedPolicy([Reply(tool_calls=calls)])) as server:
        resp = await post(server, {"model": "m", "messages": USER, "stream": True})
    events = sse_events(resp.text)
    deltas = [e["choices"][0]["delta"]["tool_calls"][0] for e in events[1:-2]]
    assert [d["index"] for d in deltas] == [0, 1]
    assert [d["function"] for d in deltas] == [
        {"name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"name": "mul", "arguments": '{"a": 5, "b": 2}'},
    ]
    assert all(d["type"] == "function" for d in deltas)
    assert len({d["id"] for d in deltas}) == 2
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    # No usage chunk unless the client asked for it (as OpenAI does).
    assert all(e == "[DONE]" or e["choices"] for e in events)


async def test_policy_usage_and_finish_reason_are_passed_through() -> None:
    reply = Reply(content="abc", usage=Usage(prompt_tokens=11, completion_tokens=3), finish_reason="length")
    async with OpenAIServer(ScriptedPolicy([reply])) as server:
        body = {"model": "m", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}
        events = sse_events((await post(server, body)).text)
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}


async def test_non_stream_json_completion() -> None:
    replies = [Reply(tool_calls=[ToolCall(name="add", arguments='{"a": 1, "b": 2}', id="call_x")]), "3"]
    async with OpenAIServer(ScriptedPolicy(replies), model_name="ignored") as server:
        first = (await post(server, {"model": "m2", "messages": USER})).json()
        second = (await post(server, {"model": "m2", "messages": USER, "stream": False})).json()
    assert first["object"] == "chat.completion" and first["model"] == "m2"
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_x", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    ]
    assert second["choices"][0]["message"] == {"role": "assistant", "content": "3"}
    assert second["choices"][0]["finish_reason"] == "stop"
    assert second["usage"]["total_tokens"] == second["usage"]["prompt_tokens"] + second["usage"]["completion_tokens"]
    assert first["id"] != second["id"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        ({"messages": USER}, "`model`"),
        ({"model": "m"}, "`messages`"),
        ({"model": "m", "messages": []}, "at least one message"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "$.messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "$.messages[0].content"),
        ({"model": "m", "messages": USER, "tools": [{"type": "function"}]}, "$.tools[0]"),
        ({"model": "m", "messages": USER, "stream": "yes"}, "$.stream"),
        ({"model": "m", "messages": USER, "n": 2}, "n=2"),
    ],
)
async def test_malformed_requests_get_400_naming_the_problem(body: Any, needle: str) -> None:
    policy = ScriptedPolicy(["never"])
    async with OpenAIServer(policy) as server:
        resp = await post(server, body)
        assert server.requests == []  # rejected before recording or reaching the policy
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert needle in error["message"]


async def test_policy_failures_are_500_with_the_reason() -> None:
    class Crashing:
        async def respond(self, request: ChatRequest) -> Reply:
            raise KeyError("boom")

    async with OpenAIServer(ScriptedPolicy([])) as server:
        exhausted = await post(server, {"model": "m", "messages": USER, "stream": True})
    async with OpenAIServer(Crashing()) as server:
        crashed = await post(server, {"model": "m", "messages": USER})
    assert exhausted.status_code == 500 and "exhausted" in exhausted.json()["error"]["message"]
    assert crashed.status_code == 500 and "KeyError" in crashed.json()["error"]["message"]


async def test_requests_are_recorded_without_headers() -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "sys"}, *USER],
        "tools": tools,
        "temperature": 0.7,
        "max_tokens": 64,
        "top_k": 20,
        "stream": True,
    }
    headers = {"Authorization": "Bearer sk-secret", "X-Session-ID": "rollout-1"}
    async with OpenAIServer(ScriptedPolicy(["ok"])) as server:
        await post(server, body, headers=headers)
        (recorded,) = server.requests
    req = recorded.request
    assert recorded.path == "/v1/chat/completions"
    assert req.session_id == "rollout-1"
    assert [m.role for m in req.messages] == ["system", "user"]
    assert req.tool_names == ["add"]
    assert req.sampling == {"temperature": 0.7, "max_tokens": 64, "top_k": 20}
    assert "sk-secret" not in repr(server.requests)


async def test_path_without_v1_models_and_health() -> None:
    async with OpenAIServer(ScriptedPolicy(["a"]), model_name="tiny") as server:
        root = f"http://{server.host}:{server.port}"
        async with httpx.AsyncClient() as client:
            bare = await client.post(f"{root}/chat/completions", json={"model": "m", "messages": USER})
            models = (await client.get(f"{server.base_url}/models")).json()
            health = await client.get(f"{root}/health")
    assert bare.json()["choices"][0]["message"]["content"] == "a"
    assert models["data"][0]["id"] == "tiny"
    assert health.json() == {"ok": True}


async def test_openai_sdk_consumes_the_stream() -> None:
    openai = pytest.importorskip("openai")
    replies = [Reply(tool_calls=[ToolCall(name="add", arguments='{"a": 2, "b": 3}')]), Reply(content="5")]
    async with OpenAIServer(ScriptedPolicy(replies)) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="dummy")
        try:
            stream = await client.chat.completions.create(
                model="m", messages=USER, stream=True, stream_options={"include_usage": True}
            )
            name, args, finish, usage = "", "", None, None
            async for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                    for call in choice.delta.tool_calls or []:
                        name += call.function.name or ""
                        args += call.function.arguments or ""
            plain = await client.chat.completions.create(model="m", messages=USER)
        finally:
            await client.close()
    assert (name, json.loads(args), finish) == ("add", {"a": 2, "b": 3}, "tool_calls")
    assert usage is not None and usage.total_tokens > 0
    assert plain.choices[0].message.content == "5"


async def test_start_stop_and_ephemeral_ports() -> None:
    server = OpenAIServer(ScriptedPolicy([]))
    with pytest.raises(RuntimeError):
        _ = server.base_url
    async with server, OpenAIServer(ScriptedPolicy([])) as other:
        assert server.port != other.port and server.port > 0
    with pytest.raises(RuntimeError):
        _ = server.port
