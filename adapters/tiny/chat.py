"""The tiny models' chat format: a Qwen3-hermes-style template, prompt rendering and reply parsing.

The format follows Qwen3's: ``<|im_start|>role\\n...<|im_end|>\\n`` turns; the tools are listed in the
system turn; an assistant calls a tool with ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``;
tool results come back as a ``user`` turn holding one ``<tool_response>`` block per result (consecutive
tool messages share one turn). Two deliberate differences keep prompts short for a model with a few
hundred thousand parameters: a tool is listed as one signature line (``add(a: integer, b: integer)``)
rather than its full JSON schema (no descriptions, no usage instructions), and there is no ``<think>``
block. Signatures also render the same whether the schema came from the family or through MCP.

A generated reply is parsed back the way vLLM's hermes parser does: each well-formed ``<tool_call>`` block
becomes a tool call; the text outside them (and any malformed block) is the content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from transformers import PreTrainedTokenizerFast

__all__ = [
    "CHAT_TEMPLATE",
    "IM_END",
    "IM_START",
    "PAD",
    "SPECIAL_TOKENS",
    "TEXT_TOKENS",
    "ParsedReply",
    "ParsedToolCall",
    "normalise_messages",
    "parse_reply",
    "render_prompt",
    "render_text",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|endoftext|>"
# Control tokens (skipped when decoding with skip_special_tokens) and tokens that are single ids but
# decode as text (Qwen3 treats <tool_call> the same way), so a parser sees them in decoded text.
SPECIAL_TOKENS: tuple[str, ...] = (PAD, IM_START, IM_END)
TEXT_TOKENS: tuple[str, ...] = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

CHAT_TEMPLATE = (
    "{%- if messages and messages[0].role == 'system' %}"
    "{%- set sys = messages[0].content %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set sys = '' %}{%- set rest = messages %}{%- endif %}"
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}{%- if sys %}{{- sys + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n<tools>' }}"
    "{%- for tool in tools %}{%- set f = tool.function if tool.function is defined else tool %}"
    "{{- '\\n' + f.name + '(' }}"
    "{%- if f.parameters is defined and f.parameters and f.parameters.properties is defined %}"
    "{%- for pname, p in f.parameters.properties.items() %}"
    "{{- pname + ': ' + (p.type if p.type is defined and p.type is string else 'any') }}"
    "{%- if not loop.last %}{{- ', ' }}{%- endif %}{%- endfor %}{%- endif %}"
    "{{- ')' }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}"
    "{%- elif sys %}{{- '<|im_start|>system\\n' + sys + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for m in rest %}"
    "{%- if m.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{%- if m.content %}{{- m.content }}{%- endif %}"
    "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}"
    "{%- set f = tc.function if tc.function is defined else tc %}"
    "{%- if (loop.first and m.content) or not loop.first %}{{- '\\n' }}{%- endif %}"
    '{{- \'<tool_call>\\n{"name": "\' + f.name + \'", "arguments": \' }}'
    "{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}"
    "{%- if loop.first or rest[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' }}"
    "{%- if loop.last or rest[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _text(content: Any) -> str:
    """Message content as one string: OpenAI allows a string, null, or a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    raise ValueError(f"message content must be a string, null or a list of parts, got {type(content).__name__}")


def normalise_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Plain dicts the template can render: string content, ``developer`` read as ``system``."""
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise ValueError(f"messages[{i}].role: unsupported role {role!r}")
        item: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _text(message.get("content")),
        }
        calls = message.get("tool_calls")
        if calls:
            item["tool_calls"] = [dict(call) for call in calls]
        out.append(item)
    return out


def render_text(
    tokenizer: PreTrainedTokenizerFast,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> str:
    """The conversation rendered by the tokenizer's chat template, as text."""
    text = tokenizer.apply_chat_template(
        normalise_messages(messages),
        tools=[dict(t) for t in tools] if tools else None,
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
    )
    if not isinstance(text, str):
        raise TypeError(f"chat template rendered {type(text).__name__}, expected str")
    return text


def render_prompt(
    tokenizer: PreTrainedTokenizerFast,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> list[int]:
    """Token ids of the rendered conversation (ending in ``<|im_start|>assistant\\n`` by default)."""
    text = render_text(tokenizer, messages, tools, add_generation_prompt=add_generation_prompt)
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


class ParsedToolCall(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text the server sends (and the template renders back verbatim)."""
        return json.dumps(self.arguments, ensure_ascii=False)


class ParsedReply(msgspec.Struct, frozen=True, kw_only=True):
    content: str | None
    tool_calls: list[ParsedToolCall]

    def assistant_message(self, call_ids: Sequence[str] | None = None) -> dict[str, Any]:
        """The assistant message an OpenAI client appends to the conversation for this reply."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            ids = list(call_ids) if call_ids is not None else [f"call_{i}" for i in range(len(self.tool_calls))]
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                for cid, c in zip(ids, self.tool_calls, strict=True)
            ]
        return message


_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _parse_call(body: str) -> ParsedToolCall | None:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    arguments = obj.get("arguments", {})
    if isinstance(arguments, str):  # some models emit the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ParsedToolCall(name=obj["name"], arguments=arguments)


def parse_reply(text: str) -> ParsedReply:
    """Content and tool calls of a generated reply (decoded without special tokens such as ``<|im_end|>``)."""
    calls: list[ParsedToolCall] = []
    kept: list[str] = []
    pos = 0
    for match in _CALL_RE.finditer(text):
        call = _parse_call(match.group(1))
        kept.append(text[pos : match.start()])
        if call is None:
            kept.append(match.group(0))  # a malformed call stays visible as text, as with vLLM's parser
        else:
            calls.append(call)
        pos = match.end()
    kept.append(text[pos:])
    content = "".join(kept).strip()
    return ParsedReply(content=content or None, tool_calls=calls)
