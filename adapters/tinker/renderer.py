"""The renderer port: messages + tool schemas -> prompt token ids; sampled ids -> an assistant turn.

One implementation, :class:`ChatTemplateRenderer`, over a Hugging Face tokenizer's own chat template
(hermes / Qwen3 style ``<tool_call>{json}</tool_call>``), loaded lazily on first use. The tinker-cookbook
renderers (``renderers.get_renderer("qwen3", tok)``) can be plugged in behind the same port once the
cookbook's ``transformers<=5.5.4`` cap is lifted (docs/outer-rl.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
from transformers import PreTrainedTokenizerBase

from adapters.tiny.chat import IM_END, ParsedToolCall, parse_reply, render_prompt

__all__ = ["ChatTemplateRenderer", "ParsedTurn", "Renderer"]


class ParsedTurn(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    tool_calls: list[ParsedToolCall]


class Renderer(Protocol):
    def build_prompt(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[int]: ...

    def stop_tokens(self) -> list[int]: ...

    def parse(self, tokens: Sequence[int]) -> ParsedTurn: ...


class ChatTemplateRenderer:
    """Renders with ``tokenizer.apply_chat_template`` and parses hermes tool calls from the decoded reply."""

    def __init__(self, load_tokenizer: Callable[[], PreTrainedTokenizerBase]) -> None:
        self._load = load_tokenizer
        self._tok: PreTrainedTokenizerBase | None = None

    @classmethod
    def from_pretrained(cls, name_or_path: str) -> ChatTemplateRenderer:
        """Lazily ``AutoTokenizer.from_pretrained(name_or_path)`` (a hub id or a local directory)."""

        def load() -> PreTrainedTokenizerBase:
            from transformers import AutoTokenizer

            tok: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(name_or_path)
            return tok

        return cls(load)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        if self._tok is None:
            self._tok = self._load()
            if not getattr(self._tok, "chat_template", None):
                raise ValueError("renderer: the tokenizer has no chat template")
        return self._tok

    def build_prompt(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[int]:
        return render_prompt(self.tokenizer, messages, tools or None)  # type: ignore[arg-type]

    def stop_tokens(self) -> list[int]:
        tok = self.tokenizer
        ids: set[int] = set()
        im_end = tok.convert_tokens_to_ids(IM_END)
        if isinstance(im_end, int) and im_end != tok.unk_token_id:
            ids.add(im_end)
        if isinstance(tok.eos_token_id, int):
            ids.add(tok.eos_token_id)
        if not ids:
            raise ValueError("renderer: the tokenizer has neither <|im_end|> nor an eos token")
        return sorted(ids)

    def parse(self, tokens: Sequence[int]) -> ParsedTurn:
        text = self.tokenizer.decode(list(tokens), skip_special_tokens=True)
        if not isinstance(text, str):
            raise TypeError(f"decode returned {type(text).__name__}, expected str")
        reply = parse_reply(text)
        return ParsedTurn(content=reply.content or "", tool_calls=list(reply.tool_calls))
