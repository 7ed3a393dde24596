"""The Tinker agent policy: each turn rendered, sampled on a Tinker sampler, parsed into tool calls.

The reply's ``training`` dict carries what the learner needs (the episode runner stores it in the turn
blob): prompt ids, sampled ids, the sampler's logprobs and the sampler version. A policy is bound to one
sampler version for its whole episode, so an episode is never sampled from two policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tinker import types

from handlers.ports.policy import AgentReply, PolicyError, ToolCall

from .port import SamplingClientLike
from .renderer import Renderer

__all__ = ["TinkerPolicy"]


class TinkerPolicy:
    def __init__(
        self,
        *,
        model: str,
        renderer: Renderer,
        sampler: SamplingClientLike,
        sampler_version: int,
        max_tokens: int = 4096,
        temperature: float = 1.0,
    ) -> None:
        self.name = f"tinker:{model}"
        self.model = model
        self._renderer = renderer
        self._sampler = sampler
        self.sampler_version = sampler_version
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._turn = 0

    def skip_to(self, turn: int) -> None:
        """Continue an interrupted episode at turn ``turn`` (tool-call ids stay unique within the episode)."""
        self._turn = turn

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply:
        prompt = self._renderer.build_prompt(messages, tools)
        params = types.SamplingParams(
            max_tokens=self._max_tokens, temperature=self._temperature, stop=self._renderer.stop_tokens()
        )
        try:
            resp = await self._sampler.sample(types.ModelInput.from_ints(prompt), 1, params)
        except Exception as exc:  # the SDK already retried; surface it as the policy's failure
            raise PolicyError(f"tinker sample failed: {type(exc).__name__}: {exc}") from exc
        if not resp.sequences:
            raise PolicyError("tinker sample returned no sequence")
        seq = resp.sequences[0]
        tokens = list(seq.tokens)
        logprobs = seq.logprobs
        if logprobs is None or len(logprobs) != len(tokens):
            raise PolicyError("tinker sample returned no logprobs for the sampled tokens")
        parsed = self._renderer.parse(tokens)
        turn = self._turn
        self._turn += 1
        calls = [
            ToolCall(id=f"call_{turn}_{i}", name=c.name, arguments=c.arguments_json)
            for i, c in enumerate(parsed.tool_calls)
        ]
        finish = "tool_calls" if calls else ("length" if seq.stop_reason == "length" else "stop")
        training: Mapping[str, Any] = {
            "prompt_tokens": prompt,
            "sampled_tokens": tokens,
            "sampled_logprobs": [float(x) for x in logprobs],
            "sampler_version": self.sampler_version,
            "stop_reason": str(seq.stop_reason),
        }
        return AgentReply(
            content=parsed.content,
            tool_calls=calls,
            model=self.model,
            input_tokens=len(prompt),
            cached_input_tokens=int(resp.prompt_cache_hit_tokens),
            output_tokens=len(tokens),
            finish_reason=finish,
            training=dict(training),
        )
