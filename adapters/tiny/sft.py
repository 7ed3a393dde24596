"""Supervised fine-tuning pieces: conversations -> token ids with an assistant-token loss mask, and one step.

The loss covers exactly what the model will generate at inference: each assistant turn's text and its
closing ``<|im_end|>``; never the system prompt, the task, the tool results or the
``<|im_start|>assistant\\n`` header (the server writes those).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from .chat import IM_END, IM_START, render_text

__all__ = ["assistant_mask", "copy_batch", "encode_conversation", "sft_loss"]


def assistant_mask(tokenizer: PreTrainedTokenizerFast, ids: Sequence[int]) -> list[bool]:
    """True at the tokens of assistant turns (after their header, through ``<|im_end|>``)."""
    header: list[int] = tokenizer(f"{IM_START}assistant\n", add_special_tokens=False)["input_ids"]
    end = tokenizer.convert_tokens_to_ids(IM_END)
    mask = [False] * len(ids)
    i, h = 0, len(header)
    while i <= len(ids) - h:
        if list(ids[i : i + h]) == header:
            j = i + h
            while j < len(ids):
                mask[j] = True
                if ids[j] == end:
                    break
                j += 1
            i = j + 1
        else:
            i += 1
    return mask


def encode_conversation(
    tokenizer: PreTrainedTokenizerFast,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
) -> tuple[list[int], list[bool]]:
    """Token ids of a whole conversation and its assistant-token mask."""
    text = render_text(tokenizer, messages, tools, add_generation_prompt=False)
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids, assistant_mask(tokenizer, ids)


def sft_loss(model: Qwen3ForCausalLM, batch: Sequence[tuple[list[int], list[bool]]], pad_id: int) -> Tensor:
    """Mean next-token cross-entropy over the masked (assistant) tokens of a right-padded batch."""
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    for i, (ids, mask) in enumerate(batch):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attn[i, : len(ids)] = 1
        labels[i, : len(ids)] = torch.where(torch.tensor(mask), torch.tensor(ids), torch.tensor(-100))
    positions = torch.arange(width).unsqueeze(0).expand(len(batch), -1)
    logits = model(input_ids=input_ids, attention_mask=attn, position_ids=positions).logits
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
    )


def copy_batch(
    rng: random.Random, token_pool: Sequence[int], batch: int, length: int
) -> list[tuple[list[int], list[bool]]]:
    """Synthetic induction data: a random token segment, then the same segment again (loss on the copy).

    A few hundred cheap steps of this before SFT form the copying circuit (previous-token + induction
    heads) that every family needs to carry values from the prompt and tool results into tool calls;
    learned from traces alone, that circuit takes many times more compute to appear.
    """
    out: list[tuple[list[int], list[bool]]] = []
    for _ in range(batch):
        n = rng.randint(length // 4, length // 2)
        segment = [rng.choice(token_pool) for _ in range(n)]
        out.append((segment + segment, [False] * n + [True] * n))
    return out
