"""Qwen3.5 / Qwen3.6 replies: the thinking block and the XML tool calls, read back from decoded text.

Qwen3.5 and Qwen3.6 (``Qwen/Qwen3.6-35B-A3B``, the seed's agent model) call tools with XML, not Qwen3's
hermes JSON::

    <tool_call>
    <function=read_file>
    <parameter=path>
    INSTRUCTIONS.md
    </parameter>
    </function>
    </tool_call>

and the generation prompt ends with an open ``<think>\\n``, so a sampled reply starts inside the thinking block:
``reasoning\\n</think>\\n\\ncontent\\n\\n<tool_call>...``. This module reads such a reply the way
``tinker-cookbook``'s ``qwen3_5`` renderer does (``Qwen3_5Renderer._parse_qwen3_5_tool_call_xml``): each
parameter value is JSON when it parses as JSON and the raw text otherwise; a block with anything but
parameters inside its ``<function>`` stays in the content as text, as a malformed hermes call does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from adapters.tiny.chat import ParsedReply, ParsedToolCall

__all__ = ["THINK_END", "is_xml_tool_template", "parse_xml_reply"]

THINK_END = "</think>"
_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION_RE = re.compile(r"^\s*<function=(?P<name>[^>\n]+)>\s*(?P<body>.*?)\s*</function>\s*$", re.DOTALL)
_PARAM_RE = re.compile(r"<parameter=(?P<name>[^>\n]+)>\s*(?P<value>.*?)\s*</parameter>", re.DOTALL)


def is_xml_tool_template(chat_template: str) -> bool:
    """Whether a chat template asks for Qwen3.5-style XML calls (``<function=...>``) rather than JSON."""
    return "<function=" in chat_template and "<parameter=" in chat_template


def _parse_call(body: str) -> ParsedToolCall | None:
    match = _FUNCTION_RE.match(body)
    if match is None or not match.group("name").strip():
        return None
    inner = match.group("body")
    arguments: dict[str, Any] = {}
    pos = 0
    for param in _PARAM_RE.finditer(inner):
        if inner[pos : param.start()].strip():
            return None  # text between parameters: not a call the template could have written
        name = param.group("name").strip()
        if not name:
            return None
        raw = param.group("value").strip("\n")
        try:
            arguments[name] = json.loads(raw)
        except json.JSONDecodeError:
            arguments[name] = raw
        pos = param.end()
    if inner[pos:].strip():
        return None
    return ParsedToolCall(name=match.group("name").strip(), arguments=arguments)


def parse_xml_reply(text: str) -> tuple[str, ParsedReply]:
    """``(reasoning, reply)`` of a decoded Qwen3.5 reply (special tokens such as ``<|im_end|>`` skipped).

    The reasoning is everything before ``</think>`` (the prompt opened the block); a reply without
    ``</think>`` has none. The content is the text outside the well-formed calls, stripped.
    """
    reasoning = ""
    if THINK_END in text:
        head, text = text.split(THINK_END, 1)
        reasoning = head.removeprefix("<think>").strip()
    calls: list[ParsedToolCall] = []
    kept: list[str] = []
    pos = 0
    for match in _CALL_RE.finditer(text):
        call = _parse_call(match.group(1))
        kept.append(text[pos : match.start()])
        if call is None:
            kept.append(match.group(0))
        else:
            calls.append(call)
        pos = match.end()
    kept.append(text[pos:])
    content = "".join(kept).strip()
    return reasoning, ParsedReply(content=content or None, tool_calls=calls)
