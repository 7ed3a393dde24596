"""The OpenAI chat-completions wire format, model-independent: request parsing and reply types.

A request body is decoded into :class:`ChatRequest` (typed fields for what a policy needs, the rest of
the body kept in ``extra`` so sampling knobs such as vLLM's ``top_k`` are recorded, not lost). Bad input
raises :class:`RequestError` whose message names the offending field (msgspec's ``$.messages[0].role``
paths), which the HTTP layer turns into a 400.

A policy answers with a :class:`Reply`: text, tool calls, or both. Nothing here knows about models,
policies or HTTP, so the tiny-model server can reuse it as is.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "ChatRequest",
    "ContentPart",
    "FunctionCall",
    "FunctionSpec",
    "Message",
    "MessageToolCall",
    "Reply",
    "RequestError",
    "StreamOptions",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "parse_chat_request",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]


class RequestError(ValueError):
    """A request the server cannot serve; the message is client-facing and names the field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ContentPart(msgspec.Struct, frozen=True, kw_only=True):
    """One part of a multi-part content list; only text parts carry text."""

    type: str
    text: str | None = None


class FunctionCall(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    arguments: str = ""


class MessageToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call as it appears inside an assistant message of the conversation."""

    id: str
    function: FunctionCall
    type: str = "function"


class Message(msgspec.Struct, frozen=True, kw_only=True):
    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None

    @property
    def text(self) -> str:
        """The message's text, whichever content form it was sent in."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content if part.type == "text")


class FunctionSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    type: Literal["function"]
    function: FunctionSpec


class StreamOptions(msgspec.Struct, frozen=True, kw_only=True):
    include_usage: bool = False


# Top-level keys with a typed field on ChatRequest; every other key lands in ``extra``.
_TYPED_KEYS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "n",
    }
)


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One decoded chat-completions request (``session_id`` comes from the ``X-Session-ID`` header)."""

    model: str
    messages: list[Message]
    tools: list[ToolSpec] = []
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int | None = None
    extra: dict[str, Any] = {}
    session_id: str | None = None

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def tool_names(self) -> list[str]:
        return [tool.function.name for tool in self.tools]

    @property
    def sampling(self) -> dict[str, Any]:
        """The sampling parameters that were set, typed and extra alike."""
        typed = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "max_completion_tokens": self.max_completion_tokens,
            "seed": self.seed,
            "stop": self.stop,
            "n": self.n,
        }
        return {**{k: v for k, v in typed.items() if v is not None}, **self.extra}


def parse_chat_request(body: bytes, session_id: str | None = None) -> ChatRequest:
    """Decode and check a request body; raise :class:`RequestError` naming the bad field."""
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise RequestError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise RequestError(f"request body must be a JSON object, got {type(raw).__name__}")
    for key in ("model", "messages"):
        if key not in raw:
            raise RequestError(f"missing required field `{key}`", param=key)
    typed = {k: v for k, v in raw.items() if k in _TYPED_KEYS}
    extra = {k: v for k, v in raw.items() if k not in _TYPED_KEYS}
    try:
        request = msgspec.convert({**typed, "extra": extra, "session_id": session_id}, ChatRequest)
    except msgspec.ValidationError as exc:
        raise RequestError(f"invalid request: {exc}") from None
    if not request.messages:
        raise RequestError("`messages` must hold at least one message", param="messages")
    if request.n not in (None, 1):
        raise RequestError(f"only n=1 is supported, got n={request.n}", param="n")
    return request


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the model makes; ``arguments`` is the JSON text, ``id`` is generated when absent."""

    name: str
    arguments: str = "{}"
    id: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """What a policy answers: text and/or tool calls.

    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``;
    ``usage`` defaults to an estimate (a model-backed policy passes its real token counts).
    """

    content: str | None = None
    tool_calls: list[ToolCall] = []
    usage: Usage | None = None
    finish_reason: Literal["stop", "tool_calls", "length"] | None = None

    @property
    def resolved_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"
