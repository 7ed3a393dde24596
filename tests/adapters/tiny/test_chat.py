"""The chat template (tools, tool calls, tool results) and parsing generated replies back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from families import SYSTEM_PROMPT, get_family

TOOLS = get_family("calc_chain").tool_schemas()
CONVERSATION = [
    {"role": "system", "content": SYSTEM_PROMPT},
    {"role": "user", "content": "Start with 3. Add 4. What is the result?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a": 3, "b": 4}'}}],
    },
    {"role": "tool", "tool_call_id": "c0", "name": "add", "content": "7"},
]


def test_tools_render_as_signatures_in_the_system_turn(micro_ckpt):
    from adapters.tiny.chat import render_text

    text = render_text(micro_ckpt.tokenizer, CONVERSATION[:2], TOOLS)
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n" + SYSTEM_PROMPT)
    for schema in TOOLS:
        fn = schema["function"]
        params = ", ".join(f"{k}: {v['type']}" for k, v in fn["parameters"]["properties"].items())
        assert f"\n{fn['name']}({params})" in system
    assert text.endswith("<|im_start|>assistant\n")


def test_tool_call_and_result_render_in_hermes_form(micro_ckpt):
    from adapters.tiny.chat import render_text

    text = render_text(micro_ckpt.tokenizer, CONVERSATION, TOOLS)
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>\n'
        in text
    )
    assert "<|im_start|>user\n<tool_response>\n7\n</tool_response><|im_end|>\n" in text


def test_consecutive_tool_results_share_one_user_turn(micro_ckpt):
    from adapters.tiny.chat import render_text

    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": i, "b": 1})}}
        for i in range(2)
    ]
    messages = [
        *CONVERSATION[:2],
        {"role": "assistant", "content": "thinking", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c0", "content": "1"},
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
    ]
    text = render_text(micro_ckpt.tokenizer, messages, TOOLS)
    assert "thinking\n<tool_call>" in text
    assert "</tool_call>\n<tool_call>" in text
    assert (
        "<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response><|im_end|>" in text
    )


def test_content_parts_and_developer_role_are_accepted(micro_ckpt):
    from adapters.tiny.chat import render_prompt

    as_parts = [{"role": "developer", "content": [{"type": "text", "text": SYSTEM_PROMPT}]}, CONVERSATION[1]]
    assert render_prompt(micro_ckpt.tokenizer, as_parts, TOOLS) == render_prompt(
        micro_ckpt.tokenizer, CONVERSATION[:2], TOOLS
    )


def test_no_tools_no_tool_block(micro_ckpt):
    from adapters.tiny.chat import render_text

    text = render_text(micro_ckpt.tokenizer, CONVERSATION[:2], None)
    assert "<tools>" not in text
    assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT + "<|im_end|>\n<|im_start|>user\n")


_names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
_values = st.one_of(st.integers(-10_000, 10_000), st.text(max_size=12), st.booleans())


def _parsed_tool_calls() -> st.SearchStrategy[list[Any]]:
    from adapters.tiny.chat import ParsedToolCall  # drawn at test time: chat.py loads transformers

    return st.lists(
        st.builds(ParsedToolCall, name=_names, arguments=st.dictionaries(_names, _values, max_size=3)), max_size=3
    )


_calls = st.deferred(_parsed_tool_calls)
_content = st.one_of(st.none(), st.text(max_size=40).map(str.strip).filter(lambda s: s and "<tool_call>" not in s))


@settings(max_examples=60, deadline=None)
@given(content=_content, calls=_calls)
def test_rendered_assistant_turn_parses_back(micro_ckpt, content, calls):
    """What the template renders for an assistant message is what the parser reads out of a generation."""
    from adapters.tiny.chat import ParsedReply, parse_reply, render_text

    reply = ParsedReply(content=content, tool_calls=calls)
    text = render_text(micro_ckpt.tokenizer, [reply.assistant_message()], None, add_generation_prompt=False)
    generated = text.removeprefix("<|im_start|>assistant\n").removesuffix("<|im_end|>\n")
    parsed = parse_reply(generated)
    assert parsed.tool_calls == calls
    assert parsed.content == content


def test_malformed_tool_call_stays_content():
    from adapters.tiny.chat import parse_reply

    parsed = parse_reply('<tool_call>\n{"name": "add", "arguments": {"a": 1,\n</tool_call>')
    assert parsed.tool_calls == []
    assert parsed.content is not None and parsed.content.startswith("<tool_call>")


def test_arguments_given_as_json_string_are_decoded():
    from adapters.tiny.chat import ParsedToolCall, parse_reply

    parsed = parse_reply('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1}"}</tool_call>')
    assert parsed.tool_calls == [ParsedToolCall(name="add", arguments={"a": 1})]
    assert parsed.content is None
