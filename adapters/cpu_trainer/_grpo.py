"""The GRPO update on a CPU: group-relative advantages and a clipped importance-sampling policy gradient.

Per group (the rollouts of one task): ``A_i = r_i - mean(r)`` (no std normalisation: a group that is all
right or all wrong carries no signal, and a near-tie is not blown up). Every sampled token of an episode
(its assistant turns; prompts and tool results are not trained on) gets its episode's advantage. With
``ratio = exp(logp_now - logp_sampled)`` per token::

    loss_token = -min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A) + kl_coef * k3(now, base)

averaged over every trained token of the batch (token-level, as prime-rl's default loss), one optimizer
step per epoch, the gradient norm clipped. ``k3 = exp(b - p) - (b - p) - 1`` is the usual non-negative
per-token KL estimate to the base model. ``logp_sampled`` is what the sampler recorded (log-softmax of
logits / temperature), recomputed here at the same temperature, so the ratio starts at 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import msgspec
import torch
from torch import Tensor
from transformers import Qwen3ForCausalLM

__all__ = [
    "EpisodeSample",
    "TurnSample",
    "UpdateStats",
    "group_advantages",
    "grpo_update",
    "sequence_logprobs",
    "token_loss",
]

_TOKENS_PER_CHUNK = 16384  # forward/backward this many tokens at a time (memory), one optimizer step per epoch


class TurnSample(msgspec.Struct, frozen=True, kw_only=True):
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]  # sampling-time log-probs of token_ids


class EpisodeSample(msgspec.Struct, frozen=True, kw_only=True):
    """One rollout as the learner sees it: which group, its reward, its sampled turns."""

    group: int
    reward: float
    turns: list[TurnSample]
    malformed: bool = False  # a turn ran out of tokens or said nothing
    ok: bool = True  # the rollout finished without an error


class UpdateStats(msgspec.Struct, frozen=True, kw_only=True):
    loss: float  # mean over epochs of the token-mean loss
    tokens: int  # trained tokens per epoch
    episodes: int  # episodes with a non-zero advantage
    clip_fraction: float  # tokens whose ratio left the clip range (last epoch)
    kl: float  # mean k3 to the base (0 without a reference model)
    grad_norm: float  # before clipping, last epoch
    max_ratio_error: float  # first epoch: max |ratio - 1| (sampler/trainer agreement; ~0 expected)


def group_advantages(rewards: Sequence[float], groups: Sequence[int]) -> list[float]:
    """``reward - mean reward of its group`` for every episode."""
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards for {len(groups)} group labels")
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for r, g in zip(rewards, groups, strict=True):
        sums[g] = sums.get(g, 0.0) + r
        counts[g] = counts.get(g, 0) + 1
    return [r - sums[g] / counts[g] for r, g in zip(rewards, groups, strict=True)]


def token_loss(new: Tensor, old: Tensor, advantage: float, clip_low: float, clip_high: float) -> tuple[Tensor, Tensor]:
    """Per-token clipped surrogate loss and whether each token was clipped."""
    ratio = torch.exp(new - old)
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    surrogate = torch.minimum(ratio * advantage, clipped * advantage)
    outside = (ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)
    return -surrogate, outside


class _Row(msgspec.Struct, frozen=True):
    """One training sequence: ``ids``, the positions in it that were sampled, their sampling log-probs."""

    ids: list[int]
    positions: list[int]
    old: list[float]
    advantage: float


def _episode_rows(episode: EpisodeSample, advantage: float) -> list[_Row]:
    """One row for the whole episode when every turn's prompt extends the previous turn's prompt + reply.

    That is the usual case (the chat template renders the conversation append-only, and the reply
    re-renders as sampled), and it trains on each prompt token once instead of once per turn. When it
    does not hold (a reply that re-renders differently), each turn is its own row.
    """
    turns = [t for t in episode.turns if t.token_ids]
    if not turns:
        return []
    chained = all(
        b.prompt_ids[: len(a.prompt_ids) + len(a.token_ids)] == a.prompt_ids + a.token_ids
        for a, b in itertools.pairwise(turns)
    )
    if chained:
        last = turns[-1]
        positions = [p for t in turns for p in range(len(t.prompt_ids), len(t.prompt_ids) + len(t.token_ids))]
        old = [lp for t in turns for lp in t.logprobs]
        return [_Row(last.prompt_ids + last.token_ids, positions, old, advantage)]
    return [
        _Row(
            t.prompt_ids + t.token_ids,
            list(range(len(t.prompt_ids), len(t.prompt_ids) + len(t.token_ids))),
            list(t.logprobs),
            advantage,
        )
        for t in turns
    ]


def _rows(episodes: Sequence[EpisodeSample], drop_zero: bool) -> tuple[list[_Row], int]:
    advantages = group_advantages([e.reward for e in episodes], [e.group for e in episodes])
    rows: list[_Row] = []
    used = 0
    for episode, adv in zip(episodes, advantages, strict=True):
        if drop_zero and abs(adv) < 1e-12:
            continue
        used += 1
        rows.extend(_episode_rows(episode, adv))
    return rows, used


def _chunks(rows: list[_Row]) -> list[list[_Row]]:
    """Rows in batches of about ``_TOKENS_PER_CHUNK`` padded tokens, similar lengths together."""
    out: list[list[_Row]] = []
    current: list[_Row] = []
    for row in sorted(rows, key=lambda r: len(r.ids)):
        if current and len(row.ids) * (len(current) + 1) > _TOKENS_PER_CHUNK:
            out.append(current)
            current = []
        current.append(row)
    if current:
        out.append(current)
    return out


def sequence_logprobs(
    model: Qwen3ForCausalLM, rows: Sequence[_Row], *, temperature: float, pad_id: int = 0
) -> list[Tensor]:
    """Log-probs (of ``log_softmax(logits / temperature)``, as sampled) of each row's sampled tokens."""
    width = max(len(r.ids) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, : len(r.ids)] = torch.tensor(r.ids, dtype=torch.long)
        mask[i, : len(r.ids)] = 1
    positions = torch.arange(width).unsqueeze(0).expand(len(rows), -1)
    hidden = model.model(input_ids=input_ids, attention_mask=mask, position_ids=positions).last_hidden_state
    scale = temperature if temperature > 0 else 1.0
    out: list[Tensor] = []
    for i, r in enumerate(rows):
        # The token at position p is predicted from position p - 1; only those rows go through the LM head.
        at = torch.tensor(r.positions, dtype=torch.long)
        logits = model.lm_head(hidden[i, at - 1]).float() / scale
        target = input_ids[i, at]
        out.append(torch.log_softmax(logits, dim=-1).gather(1, target.unsqueeze(1)).squeeze(1))
    return out


def grpo_update(
    model: Qwen3ForCausalLM,
    optimizer: torch.optim.Optimizer,
    episodes: Sequence[EpisodeSample],
    *,
    temperature: float,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    epochs: int = 1,
    grad_clip: float = 1.0,
    kl_coef: float = 0.0,
    reference: Qwen3ForCausalLM | None = None,
    drop_zero_advantage: bool = True,
    pad_id: int = 0,
) -> UpdateStats:
    """``epochs`` optimizer steps on one batch of episodes (no step at all when no episode has signal)."""
    rows, used = _rows(episodes, drop_zero_advantage)
    total = sum(len(r.positions) for r in rows)
    if total == 0:
        return UpdateStats(
            loss=0.0, tokens=0, episodes=0, clip_fraction=0.0, kl=0.0, grad_norm=0.0, max_ratio_error=0.0
        )
    chunks = _chunks(rows)
    base: list[list[Tensor]] = []
    if kl_coef > 0 and reference is not None:
        with torch.no_grad():
            for chunk in chunks:
                base.append(sequence_logprobs(reference, chunk, temperature=temperature, pad_id=pad_id))
    model.train(True)
    losses: list[float] = []
    clipped = kl_sum = grad_norm = 0.0
    ratio_error = 0.0
    for epoch in range(epochs):
        optimizer.zero_grad(set_to_none=True)
        epoch_loss = 0.0
        clipped = kl_sum = 0.0
        for c, chunk in enumerate(chunks):
            new = sequence_logprobs(model, chunk, temperature=temperature, pad_id=pad_id)
            loss = torch.zeros(())
            for i, (row, lp) in enumerate(zip(chunk, new, strict=True)):
                old = torch.tensor(row.old, dtype=lp.dtype)
                per_token, outside = token_loss(lp, old, row.advantage, clip_low, clip_high)
                if base:
                    delta = base[c][i] - lp
                    k3 = torch.exp(delta) - delta - 1.0
                    per_token = per_token + kl_coef * k3
                    kl_sum += float(k3.detach().sum())
                loss = loss + per_token.sum()
                clipped += float(outside.sum())
                if epoch == 0:
                    ratio_error = max(ratio_error, float((lp.detach() - old).abs().max()))
            loss = loss / total
            loss.backward()  # type: ignore[no-untyped-call]
            epoch_loss += float(loss.detach())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip))
        if not math.isfinite(grad_norm):
            optimizer.zero_grad(set_to_none=True)  # a non-finite gradient would poison the weights: skip it
        else:
            optimizer.step()
        losses.append(epoch_loss)
    model.train(False)
    return UpdateStats(
        loss=sum(losses) / len(losses),
        tokens=total,
        episodes=used,
        clip_fraction=clipped / total,
        kl=kl_sum / total,
        grad_norm=grad_norm,
        max_ratio_error=math.expm1(ratio_error),
    )
