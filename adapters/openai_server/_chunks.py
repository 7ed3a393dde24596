"""Building chat-completions responses: SSE chunks for ``stream=true``, one JSON object otherwise.

The streamed sequence is what OpenAI-compatible clients (the verifiers eval client included) expect:
a role chunk, content and/or tool-call deltas, a chunk with an empty delta and the finish reason, a
usage chunk (only when ``stream_options.include_usage`` asked for it, as OpenAI does), then
``data: [DONE]``. :class:`ChunkStream` builds them one at a time so a model-backed server can stream
token by token; :func:`reply_chunks` builds the whole sequence for a finished :class:`Reply`.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from ._protocol import ChatRequest, Reply, ToolCall, Usage

__all__ = [
    "DONE",
    "ChunkStream",
    "completion_body",
    "error_body",
    "estimate_usage",
    "reply_chunks",
    "tool_call_id",
]

DONE = b"data: [DONE]\n\n"
_ENCODER = msgspec.json.Encoder()


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + _ENCODER.encode(payload) + b"\n\n"


def tool_call_id(completion_id: str, index: int) -> str:
    """A call id unique per completion (clients echo it back in the tool message)."""
    return f"call_{completion_id.removeprefix('chatcmpl-')}_{index}"


def _usage_body(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def estimate_usage(request: ChatRequest, reply: Reply) -> Usage:
    """A rough token count (4 characters a token) for policies that have no tokenizer."""
    prompt_chars = sum(len(m.text) for m in request.messages)
    completion_chars = len(reply.content or "") + sum(len(c.name) + len(c.arguments) for c in reply.tool_calls)
    return Usage(prompt_tokens=math.ceil(prompt_chars / 4), completion_tokens=math.ceil(completion_chars / 4))


class ChunkStream:
    """The SSE chunks of one streamed completion, built one at a time."""

    def __init__(self, completion_id: str, model: str, created: int) -> None:
        self.completion_id = completion_id
        self._base: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }

    def _choice(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return _sse({**self._base, "choices": [choice]})

    def role(self) -> bytes:
        return self._choice({"role": "assistant", "content": ""})

    def content(self, text: str) -> bytes:
        return self._choice({"content": text})

    def tool_call(self, index: int, call: ToolCall) -> bytes:
        delta = {
            "index": index,
            "id": call.id or tool_call_id(self.completion_id, index),
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        return self._choice({"tool_calls": [delta]})

    def finish(self, finish_reason: str) -> bytes:
        return self._choice({}, finish_reason)

    def usage(self, usage: Usage) -> bytes:
        return _sse({**self._base, "choices": [], "usage": _usage_body(usage)})


def reply_chunks(reply: Reply, stream: ChunkStream, usage: Usage | None) -> list[bytes]:
    """The full SSE byte sequence for ``reply``; a usage chunk only when ``usage`` is given."""
    chunks = [stream.role()]
    if reply.content:
        chunks.append(stream.content(reply.content))
    chunks.extend(stream.tool_call(i, call) for i, call in enumerate(reply.tool_calls))
    chunks.append(stream.finish(reply.resolved_finish_reason))
    if usage is not None:
        chunks.append(stream.usage(usage))
    chunks.append(DONE)
    return chunks


def completion_body(reply: Reply, completion_id: str, model: str, created: int, usage: Usage) -> dict[str, Any]:
    """The ``chat.completion`` object for a non-streamed request."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or tool_call_id(completion_id, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.resolved_finish_reason}],
        "usage": _usage_body(usage),
    }


def error_body(message: str, error_type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error envelope, which SDKs surface as the exception message."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}
