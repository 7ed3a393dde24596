"""The renderer port: messages + tool schemas -> prompt token ids; sampled ids -> an assistant turn.

One implementation, :class:`ChatTemplateRenderer`, over a Hugging Face tokenizer's own chat template, loaded
lazily on first use. Two tool-call dialects: Qwen3's hermes JSON (``<tool_call>{json}</tool_call>``) and
Qwen3.5 / Qwen3.6's XML (``<function=name><parameter=p>``, with a ``<think>`` prefill; ``qwen_xml``), told
apart by the template itself. What goes into the template is shaped as ``tinker-cookbook``'s renderer for
the family shapes it (tool-call arguments as a mapping, tools as ``{name, description, parameters}``), and
tests/adapters/tinker/test_renderer_parity.py checks the tokens against the cookbook's own renderer
(``tinker-cookbook`` 0.5.8 in a test-only venv: its ``transformers<=5.5.4`` cap keeps it out of ours).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
from transformers import PreTrainedTokenizerBase

from adapters.tiny.chat import IM_END, ParsedToolCall, parse_reply, render_prompt

from .qwen_xml import THINK_END, is_xml_tool_template, parse_xml_reply

__all__ = ["ChatTemplateRenderer", "ParsedTurn", "Renderer", "template_messages", "template_tools"]


class ParsedTurn(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    tool_calls: list[ParsedToolCall]
    reasoning: str = ""  # the thinking block, when the model wrote one (never sent back to the model)


def _mapping_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """The call with JSON-object ``arguments`` as a mapping: Qwen3.5's template iterates them as parameters
    (a string renders no parameter at all); hermes templates render a mapping as the same JSON."""
    out = dict(call)
    fn = call.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
        try:
            args = json.loads(fn["arguments"])
        except json.JSONDecodeError:
            return out
        if isinstance(args, dict):
            out["function"] = {**fn, "arguments": args}
    return out


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the chat template gets it (OpenAI messages, tool-call arguments as mappings)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item = dict(message)
        if message.get("tool_calls"):
            item["tool_calls"] = [_mapping_arguments(c) for c in message["tool_calls"]]
        out.append(item)
    return out


def template_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools as ``{name, description, parameters}``, the one-line JSON the cookbook declares."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise ValueError(f"renderer: tool {tool!r:.80} has no function name")
        out.append(
            {"name": fn["name"], "description": fn.get("description", ""), "parameters": fn.get("parameters", {})}
        )
    return out


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

    @property
    def xml_tool_calls(self) -> bool:
        """Whether the model calls tools in Qwen3.5's XML (else hermes JSON)."""
        return is_xml_tool_template(str(self.tokenizer.chat_template))

    def build_prompt(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[int]:
        return render_prompt(
            self.tokenizer,  # type: ignore[arg-type]
            template_messages(messages),
            template_tools(tools) or None,
        )

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
        if self.xml_tool_calls:
            reasoning, reply = parse_xml_reply(text)
        else:
            reasoning = ""
            if THINK_END in text:  # Qwen3 thinks first too; the reasoning is not part of the turn's content
                head, text = text.split(THINK_END, 1)
                reasoning = head.removeprefix("<think>").strip()
            reply = parse_reply(text)
        return ParsedTurn(content=reply.content or "", tool_calls=list(reply.tool_calls), reasoning=reasoning)
