"""Qwen3.5 / Qwen3.6 replies read back (``adapters.tinker.qwen_xml``) and the template inputs the Tinker renderer
shapes (``template_messages``, ``template_tools``); fast, no tokenizer. The token-level parity with
tinker-cookbook is tests/adapters/tinker/test_renderer_parity.py (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

QWEN36_TEMPLATE = Path(__file__).resolve().parents[3] / "fixtures" / "tokenizers" / "qwen3_6" / "chat_template.jinja"

REPLY = (
    "The spec first.\n</think>\n\nReading it now.\n\n"
    "<tool_call>\n<function=read_file>\n<parameter=path>\ntask_spec.json\n</parameter>\n</function>\n</tool_call>\n"
    "<tool_call>\n<function=set_limits>\n<parameter=steps>\n20\n</parameter>\n"
    '<parameter=tags>\n["a", "b"]\n</parameter>\n'
    "<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>"
)


def test_a_reply_splits_into_reasoning_content_and_typed_calls() -> None:
    from adapters.tinker.qwen_xml import parse_xml_reply

    reasoning, reply = parse_xml_reply(REPLY)
    assert reasoning == "The spec first."
    assert reply.content == "Reading it now."
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("read_file", {"path": "task_spec.json"}),
        ("set_limits", {"steps": 20, "tags": ["a", "b"], "note": "two\nlines"}),  # JSON when it parses, else text
    ]


def test_a_reply_without_thinking_or_calls_is_all_content() -> None:
    from adapters.tinker.qwen_xml import parse_xml_reply

    reasoning, reply = parse_xml_reply("  Just an answer.  ")
    assert (reasoning, reply.content, reply.tool_calls) == ("", "Just an answer.", [])


@pytest.mark.parametrize(
    "block",
    [
        "<tool_call>\n<function=read_file>\nstray text\n<parameter=path>\nx\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=read_file>\n<parameter=path>\nx\n</parameter>\ntrailing\n</function>\n</tool_call>",
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "x"}}\n</tool_call>',  # Qwen3's JSON dialect
    ],
)
def test_a_malformed_call_stays_visible_in_the_content(block: str) -> None:
    from adapters.tinker.qwen_xml import parse_xml_reply

    _, reply = parse_xml_reply(f"Before.\n{block}")
    assert reply.tool_calls == []
    assert reply.content is not None and block in reply.content


def test_the_dialect_is_told_by_the_template() -> None:
    from adapters.tinker.qwen_xml import is_xml_tool_template
    from adapters.tiny.chat import CHAT_TEMPLATE

    assert is_xml_tool_template(QWEN36_TEMPLATE.read_text(encoding="utf-8"))
    assert not is_xml_tool_template(CHAT_TEMPLATE)


def test_template_messages_give_tool_call_arguments_as_mappings() -> None:
    from adapters.tinker.renderer import template_messages

    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
                {"id": "c1", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            ],
        },
    ]
    out = template_messages(messages)
    assert out[1]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    assert out[1]["tool_calls"][1]["function"]["arguments"] == "not json"  # left as it came
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'  # the caller's list is untouched


def test_template_tools_are_flat_name_description_parameters() -> None:
    from adapters.tinker.renderer import template_tools

    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    assert template_tools([tool]) == [{"name": "f", "description": "d", "parameters": {"type": "object"}}]
    with pytest.raises(ValueError, match="no function name"):
        template_tools([{"type": "function", "function": {}}])
