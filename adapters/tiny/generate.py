"""Batched sampling from a tiny model, and the training-side log-probs of what was sampled.

:func:`generate` runs all prompts in lock-step: prompts are left-padded to one length, position ids
are given explicitly (so padding does not shift RoPE positions), and each step feeds one token per row
through the KV cache. Rows stop at a stop token (kept in the output: a trainer must learn to stop) or at
their own ``max_tokens``; finished rows are dropped from the batch as it shrinks. Every row has its own
``torch.Generator`` seeded from its :class:`SamplingParams`, so what a request samples does not depend
on which other requests shared its batch.

Log-probs are those of the distribution the token was drawn from *before* top-p truncation:
``log_softmax(logits / temperature)`` (plain ``log_softmax(logits)`` for greedy, temperature 0).
:func:`completion_logprobs` computes the same quantity in one full forward pass with gradients, so
``exp(train - sample)`` is the importance ratio, 1 up to float error for an unchanged model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec
import torch
from torch import Tensor
from transformers import Qwen3ForCausalLM

from .kv_cache import GrowingCache

__all__ = ["Sample", "SamplingParams", "choose_tokens", "completion_logprobs", "generate"]


class SamplingParams(msgspec.Struct, frozen=True, kw_only=True):
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    max_tokens: int = 128
    seed: int | None = None  # None: drawn from the caller's generator (see generate)

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 10.0:
            raise ValueError(f"temperature must be in [0, 10], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


class Sample(msgspec.Struct, frozen=True, kw_only=True):
    token_ids: list[int]  # generated ids, the stop token included when finish_reason == "stop"
    logprobs: list[float]  # one per token id
    finish_reason: Literal["stop", "length"]


def _row_seeds(params: Sequence[SamplingParams], seed_source: torch.Generator | None) -> list[int]:
    seeds: list[int] = []
    for p in params:
        if p.seed is not None:
            seeds.append(p.seed)
        else:
            drawn = torch.randint(0, 2**62, (1,), generator=seed_source)
            seeds.append(int(drawn.item()))
    return seeds


def choose_tokens(
    logits: Tensor, temps: Tensor, top_ps: Tensor, generators: Sequence[torch.Generator]
) -> tuple[Tensor, Tensor]:
    """Next token per row and its log-prob (before top-p truncation)."""
    greedy = temps <= 0
    scaled = logits / torch.where(greedy, torch.ones_like(temps), temps).unsqueeze(1)
    logprobs = torch.log_softmax(scaled.float(), dim=-1)
    probs = logprobs.exp()
    if bool((top_ps < 1).any()):
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (always at least the top token).
        drop = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= top_ps.unsqueeze(1)
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    tokens = logits.argmax(dim=-1)
    sampled = [i for i, is_greedy in enumerate(greedy.tolist()) if not is_greedy]
    if sampled:
        tokens = _draw(probs, tokens, sampled, generators)
    return tokens, logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)


def _draw(probs: Tensor, tokens: Tensor, rows: Sequence[int], generators: Sequence[torch.Generator]) -> Tensor:
    """``torch.multinomial(probs[i], 1, generator=generators[i])`` for each ``i`` in ``rows``, in one batch.

    For one sample, ATen's multinomial is ``argmax(p / q)`` with ``q ~ Exp(1)`` filled from the row's generator
    (the exponential race): the same draws from the same generators, so the same tokens and the same generator
    states after, but one division and argmax for the batch instead of a multinomial call per row, which was
    the larger half of a scoring step's sampling cost on the tiny models. tests/adapters/tiny/test_generate.py
    checks the equivalence on the installed torch, so a torch whose multinomial changes is caught there.
    """
    q = torch.empty((len(rows), probs.shape[1]), dtype=probs.dtype)
    for j, i in enumerate(rows):
        q[j].exponential_(generator=generators[i])
    if len(rows) == probs.shape[0]:
        return (probs / q).argmax(dim=-1)
    index = torch.tensor(list(rows), dtype=torch.long)
    tokens = tokens.clone()
    tokens[index] = (probs[index] / q).argmax(dim=-1)
    return tokens


@torch.no_grad()
def generate(
    model: Qwen3ForCausalLM,
    prompts: Sequence[Sequence[int]],
    params: SamplingParams | Sequence[SamplingParams],
    *,
    stop_ids: Sequence[int],
    pad_id: int = 0,
    seed_source: torch.Generator | None = None,
) -> list[Sample]:
    """Sample one completion per prompt; ``params`` is shared or one per prompt.

    A row whose ``seed`` is None gets one drawn from ``seed_source`` (torch's global generator if None).
    """
    n = len(prompts)
    if n == 0:
        return []
    row_params = [params] * n if isinstance(params, SamplingParams) else list(params)
    if len(row_params) != n:
        raise ValueError(f"{len(row_params)} sampling params for {n} prompts")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    generators = [torch.Generator().manual_seed(s) for s in _row_seeds(row_params, seed_source)]
    stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long)
    was_training = model.training
    model.train(False)

    width = max(len(p) for p in prompts)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)

    temps = torch.tensor([p.temperature for p in row_params])
    top_ps = torch.tensor([p.top_p for p in row_params])
    limits = torch.tensor([p.max_tokens for p in row_params])
    rows = torch.arange(n)  # original index of each live row
    out_ids: list[list[int]] = [[] for _ in range(n)]
    out_lps: list[list[float]] = [[] for _ in range(n)]
    finish: list[Literal["stop", "length"]] = ["length"] * n

    cache = GrowingCache()
    logits = model(
        input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1
    ).logits[:, -1, :]
    next_pos = positions[:, -1] + 1
    step = 0
    while True:
        tokens, lps = choose_tokens(logits, temps, top_ps, [generators[int(r)] for r in rows])
        step += 1
        stopped = torch.isin(tokens, stops)
        done = stopped | (limits <= step)
        for r, tok, lp, hit in zip(rows.tolist(), tokens.tolist(), lps.tolist(), stopped.tolist(), strict=True):
            out_ids[r].append(tok)
            out_lps[r].append(lp)
            if hit:
                finish[r] = "stop"
        if bool(done.all()):
            break
        keep = (~done).nonzero().squeeze(1)
        if len(keep) < len(rows):
            # Shrink the batch: a finished row would otherwise cost a full forward per step.
            cache.batch_select_indices(keep)
            mask, next_pos, tokens = mask[keep], next_pos[keep], tokens[keep]
            temps, top_ps, limits, rows = temps[keep], top_ps[keep], limits[keep], rows[keep]
        mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=torch.long)], dim=1)
        logits = model(
            input_ids=tokens.unsqueeze(1),
            attention_mask=mask,
            position_ids=next_pos.unsqueeze(1),
            cache=cache,
            use_cache=True,
        ).logits[:, -1, :]
        next_pos = next_pos + 1
    model.train(was_training)
    return [Sample(token_ids=out_ids[i], logprobs=out_lps[i], finish_reason=finish[i]) for i in range(n)]


def completion_logprobs(
    model: Qwen3ForCausalLM,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    pad_id: int = 0,
) -> list[Tensor]:
    """Log-probs of each completion token given its prompt, in one right-padded forward pass.

    Runs with whatever grad mode and train/eval mode the caller has set; returns one 1-D tensor per
    sample (length ``len(completion)``), differentiable when grad is enabled.
    """
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
    if not prompts:
        return []
    seqs = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
    width = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        input_ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    positions = torch.arange(width).unsqueeze(0).expand(len(seqs), -1)
    logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions).logits
    scale = temperature if temperature > 0 else 1.0
    out: list[Tensor] = []
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        if not c:
            out.append(logits.new_zeros(0))
            continue
        # The token at position t is predicted by the logits at t - 1.
        rows = logits[i, len(p) - 1 : len(p) + len(c) - 1].float() / scale
        target = torch.tensor(list(c), dtype=torch.long)
        out.append(torch.log_softmax(rows, dim=-1).gather(1, target.unsqueeze(1)).squeeze(1))
    return out
