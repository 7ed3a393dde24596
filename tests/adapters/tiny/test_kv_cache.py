"""The growing KV cache generates exactly what transformers' concatenating ``DynamicCache`` does.

The documented replica runs were sampled with ``DynamicCache``; the same seeds must still give the same tokens and
log-probs, bit for bit, through prompts of different lengths (left padding), rows that finish early (the batch
shrinks and the cache is re-indexed) and a generation that outgrows the cache's spare room.
"""

from __future__ import annotations

import pytest

from families import SYSTEM_PROMPT, get_family


def _prompts(ckpt, n):
    from adapters.tiny.chat import render_prompt

    fam = get_family("ledger")
    out = []
    for seed in range(n):
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "x " * (7 * seed)}]
        out.append(render_prompt(ckpt.tokenizer, messages, fam.tool_schemas()))
    return out


@pytest.mark.parametrize(("max_tokens", "room"), [(1, 64), (5, 64), (60, 64), (60, 2)])
def test_growing_cache_samples_what_the_dynamic_cache_samples(micro_ckpt, monkeypatch, max_tokens, room):
    from transformers import DynamicCache

    import adapters.tiny.generate as generate_module
    import adapters.tiny.kv_cache as kv_cache_module
    from adapters.tiny.generate import SamplingParams, generate
    from adapters.tiny.kv_cache import GrowingCache
    from adapters.tiny.tokenizer import stop_token_ids

    prompts = _prompts(micro_ckpt, 6)
    # Different limits per row: rows leave the batch at different steps, so the cache is re-indexed mid-way.
    params = [SamplingParams(max_tokens=max(1, max_tokens - 9 * i), seed=7 + i) for i in range(len(prompts))]
    monkeypatch.setattr(kv_cache_module, "_MIN_ROOM", room)  # 2: the buffer grows, copying, at decode step 3
    grown = []
    grow = kv_cache_module._GrowingLayer._grow

    def counting_grow(self, *args):
        before = self._key_buf
        grow(self, *args)
        grown.append(before is not None and self._key_buf is not before)

    monkeypatch.setattr(kv_cache_module._GrowingLayer, "_grow", counting_grow)

    def run():
        return generate(micro_ckpt.model, prompts, params, stop_ids=stop_token_ids(micro_ckpt.tokenizer))

    assert generate_module.GrowingCache is GrowingCache  # what generate() really uses
    ours = run()
    monkeypatch.setattr(generate_module, "GrowingCache", DynamicCache)
    theirs = run()
    assert [s.token_ids for s in ours] == [s.token_ids for s in theirs]
    assert [s.logprobs for s in ours] == [s.logprobs for s in theirs]  # exact floats, not approx
    if room == 2:
        assert any(grown), grown  # the buffer really outgrew its room (and rows left the batch after that)
