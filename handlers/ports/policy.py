"""The agent-policy port: given the conversation and the tool schemas, produce the next assistant turn.

Implementations: ``scripted`` (replays a recorded trajectory), ``openai`` (any OpenAI-compatible endpoint),
and later ``tinker`` (which also returns prompt/sampled token ids and logprobs for training).
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

__all__ = ["AgentPolicy", "AgentReply", "PolicyError", "ToolCall"]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; parsed (and possibly refused) by the tools


class AgentReply(msgspec.Struct, frozen=True, kw_only=True):
    content: str = ""
    tool_calls: list[ToolCall] = []
    model: str = ""
    input_tokens: int = 0  # every prompt token, the cached ones included (as the price table bills them)
    cached_input_tokens: int = 0  # the cache hits among input_tokens
    output_tokens: int = 0
    finish_reason: str = ""
    # Trainable policies put prompt/sampled token ids, logprobs and the sampler version here.
    training: dict[str, Any] = {}

    def message(self) -> dict[str, Any]:
        """The reply as an OpenAI chat message, as it goes back into the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg


class PolicyError(Exception):
    """The policy could not produce a turn (provider down after retries, script exhausted, ...)."""


class AgentPolicy(Protocol):
    name: str  # "scripted", "openai:<model>", "tinker:<model>"
    model: str  # what the price table is keyed by

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply: ...
