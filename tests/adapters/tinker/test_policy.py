from __future__ import annotations

import importlib.util
import json

import pytest

from handlers.ports.policy import PolicyError
from handlers.training import trajectory_to_datums
from handlers.training.episodes import turn_from_training

# find_spec, not importorskip: collection must not import tinker (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("tinker") is None, reason="tinker is not installed")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        },
    }
]


@pytest.fixture(scope="module")
def renderer():
    from adapters.tinker.renderer import ChatTemplateRenderer
    from adapters.tiny.tokenizer import train_tokenizer

    texts = [
        "<|im_start|>user\nadd 2 and 3<|im_end|>\n<tool_call>\n"
        '{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    ] * 20
    tok = train_tokenizer(texts, vocab_size=400)
    return ChatTemplateRenderer(lambda: tok)


def reply_ids(renderer, text):
    tok = renderer.tokenizer
    return tok(text, add_special_tokens=False)["input_ids"] + renderer.stop_tokens()[:1]


async def test_turn_is_rendered_sampled_parsed_and_recorded(renderer):
    from adapters.tinker.policy import TinkerPolicy
    from tests.fakes.tinker import FakeSamplingClient

    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    sampler = FakeSamplingClient("tinker://w/1", lambda ids: reply_ids(renderer, call))
    policy = TinkerPolicy(model="Qwen/Qwen3-8B", renderer=renderer, sampler=sampler, sampler_version=3)
    messages = [{"role": "system", "content": "be exact"}, {"role": "user", "content": "add 2 and 3"}]
    reply = await policy.next_turn(messages, TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("add", {"a": 2, "b": 3})]
    assert reply.finish_reason == "tool_calls" and policy.name == "tinker:Qwen/Qwen3-8B"
    tr = reply.training
    assert tr["prompt_tokens"] == sampler.prompts[0] == renderer.build_prompt(messages, TOOLS)
    assert tr["sampled_tokens"] == reply_ids(renderer, call)
    assert len(tr["sampled_logprobs"]) == len(tr["sampled_tokens"]) and tr["sampler_version"] == 3
    turn, version = turn_from_training(tr)
    assert version == 3 and turn.sampled_tokens == tr["sampled_tokens"]
    # the rendered prompt ends with the generation prompt, so the assistant text follows it
    assert renderer.tokenizer.decode(tr["prompt_tokens"]).endswith("<|im_start|>assistant\n")

    # second turn: the conversation grows; the rendered prompt extends the first (one datum)
    messages2 = [*messages, reply.message(), {"role": "tool", "tool_call_id": "call_0_0", "content": "5"}]
    sampler._reply = lambda ids: reply_ids(renderer, "The answer is 5.")
    reply2 = await policy.next_turn(messages2, TOOLS)
    assert reply2.tool_calls == [] and reply2.content == "The answer is 5." and reply2.finish_reason == "stop"
    turns = [turn_from_training(r.training)[0] for r in (reply, reply2)]
    assert len(trajectory_to_datums(turns, 1.0)) == 1


async def test_sampler_failure_is_a_policy_error(renderer):
    from adapters.tinker.policy import TinkerPolicy
    from tests.fakes.tinker import FakeSamplingClient

    sampler = FakeSamplingClient("p", lambda ids: [1])
    sampler.fail_next = 1
    policy = TinkerPolicy(model="m", renderer=renderer, sampler=sampler, sampler_version=0)
    with pytest.raises(PolicyError, match="sample failed"):
        await policy.next_turn([{"role": "user", "content": "hi"}], [])


def test_bad_training_record_refused():
    with pytest.raises(ValueError, match="training record"):
        turn_from_training({"prompt_tokens": [1]})
