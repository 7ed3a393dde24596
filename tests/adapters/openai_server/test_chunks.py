"""Property tests of the chunk builder: a client accumulating the stream gets back exactly the reply."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.openai_server import ChunkStream, Reply, ToolCall, Usage, completion_body, reply_chunks

names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
arguments = st.dictionaries(names, st.integers() | st.text(max_size=8), max_size=3).map(json.dumps)
tool_calls = st.lists(st.builds(ToolCall, name=names, arguments=arguments), max_size=3)
replies = st.builds(
    Reply,
    content=st.none() | st.text(max_size=40),
    tool_calls=tool_calls,
    usage=st.none() | st.builds(Usage, prompt_tokens=st.integers(0, 999), completion_tokens=st.integers(0, 999)),
)


def accumulate(chunks: list[bytes]) -> dict[str, Any]:
    """What an OpenAI client rebuilds from the stream."""
    content, calls, finish, usage, ids, done = "", {}, None, None, set(), False
    for raw in chunks:
        assert not done, "nothing may follow [DONE]"
        text = raw.decode()
        assert text.startswith("data: ") and text.endswith("\n\n")
        payload = text[len("data: ") : -2]
        if payload == "[DONE]":
            done = True
            continue
        chunk = json.loads(payload)
        ids.add(chunk["id"])
        usage = chunk.get("usage", usage)
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls", []):
                slot = calls.setdefault(call["index"], {"id": "", "name": "", "arguments": ""})
                slot["id"] += call.get("id", "")
                slot["name"] += call["function"].get("name", "")
                slot["arguments"] += call["function"].get("arguments", "")
            finish = choice["finish_reason"] or finish
    assert done and len(ids) == 1
    return {"content": content, "calls": [calls[i] for i in sorted(calls)], "finish": finish, "usage": usage}


@given(replies, st.booleans())
def test_stream_round_trips_the_reply(reply: Reply, with_usage: bool) -> None:
    usage = Usage(prompt_tokens=3, completion_tokens=4) if with_usage else None
    got = accumulate(reply_chunks(reply, ChunkStream("chatcmpl-7", "m", 0), usage))
    assert got["content"] == (reply.content or "")
    assert [(c["name"], c["arguments"]) for c in got["calls"]] == [(c.name, c.arguments) for c in reply.tool_calls]
    assert len({c["id"] for c in got["calls"]}) == len(reply.tool_calls)
    assert got["finish"] == ("tool_calls" if reply.tool_calls else "stop")
    assert got["usage"] == (None if usage is None else {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})


@given(replies)
def test_stream_and_json_forms_agree(reply: Reply) -> None:
    usage = Usage(prompt_tokens=1, completion_tokens=2)
    streamed = accumulate(reply_chunks(reply, ChunkStream("chatcmpl-9", "m", 0), usage))
    body = completion_body(reply, "chatcmpl-9", "m", 0, usage)
    message = body["choices"][0]["message"]
    assert (message["content"] or "") == streamed["content"]
    json_calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in message.get("tool_calls", [])
    ]
    assert json_calls == streamed["calls"]
    assert body["choices"][0]["finish_reason"] == streamed["finish"]
