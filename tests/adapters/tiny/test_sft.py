"""The SFT loss mask covers exactly the assistant's generated text."""

from __future__ import annotations

import random

from adapters.tiny.traces import trace_messages
from families import get_family


def test_mask_is_the_assistant_turns(micro_ckpt):
    from adapters.tiny.chat import render_prompt
    from adapters.tiny.sft import encode_conversation

    tok = micro_ckpt.tokenizer
    fam = get_family("calc_chain")
    task = fam.generate("train", 3)
    messages = trace_messages(fam, task, random.Random(0), noise=0.0)
    ids, mask = encode_conversation(tok, messages, fam.tool_schemas())
    spans, current = [], []
    for i, m in zip(ids, mask, strict=True):
        if m:
            current.append(i)
        elif current:
            spans.append(current)
            current = []
    texts = [tok.decode(s) for s in spans]
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert len(texts) == len(assistant)
    assert all(t.endswith("<|im_end|>") for t in texts)
    assert texts[-1] == f"<answer>{task.answer}</answer><|im_end|>"
    # A tool-call turn is the note, then the call: what the model must generate.
    assert texts[0].startswith(assistant[0]["content"] + "\n<tool_call>\n{")
    # Each span starts where the generation prompt for that turn ends.
    for k, span_text in enumerate(texts):
        upto = messages[: messages.index(assistant[k])]
        prompt = render_prompt(tok, upto, fam.tool_schemas())
        assert ids[: len(prompt)] == prompt
        assert tok.decode(ids[len(prompt) : len(prompt) + len(spans[k])]) == span_text


def test_sft_loss_decreases_on_a_repeated_batch(micro_ckpt):
    import copy

    import torch

    from adapters.tiny.sft import encode_conversation, sft_loss

    model = copy.deepcopy(micro_ckpt.model)
    fam = get_family("ledger")
    batch = [
        encode_conversation(
            micro_ckpt.tokenizer,
            trace_messages(fam, fam.generate("train", s), random.Random(s), 0.0),
            fam.tool_schemas(),
        )
        for s in range(4)
    ]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _ in range(5):
        loss = sft_loss(model, batch, pad_id=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
