"""What a job's ``[prime_rl]`` table means for the CPU trainer, and the CPU trainer's own knobs.

Every value the agent set is honoured where the CPU trainer has the same notion (model, steps, batch and
group size, temperature, max tokens, max turns, optimizer, scheduler and warmup, sequence length); the
others are mapped to the nearest thing it has and the mapping is written into ``notes`` (and so into the
job result), never silently dropped.

Learning rate: the agent picks it for a real Qwen3 (bounds around 1e-7..1e-4; GRPO on 0.6B typically
1e-6..1e-5). A model with a few hundred thousand parameters needs a larger step for the same effect, so
the tiny model trains at ``learning_rate * lr_scale`` (default 10: 1e-5 -> 1e-4, which gave uplift on a
partial calc_chain base; 3e-4 and above lowered the hidden-eval score, and 1e-3 collapsed the model as an
oversized rate collapses a real one). The agent's choice keeps its meaning: larger is faster and riskier.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from handlers.episode.job_config import PrimeRLTable

__all__ = ["DEFAULT_LR_SCALE", "CpuTrainSettings", "settings_from_job"]

DEFAULT_LR_SCALE = 10.0


class CpuTrainSettings(msgspec.Struct, frozen=True, kw_only=True):
    """One CPU GRPO run. ``batch_size`` counts rollouts per step: ``batch_size // group_size`` tasks."""

    model: str  # the job's model name (a Qwen id or a tiny name); the tiny checkpoint is resolved from it
    learning_rate: float  # what the tiny model trains at (job rate x lr_scale)
    max_steps: int
    batch_size: int
    group_size: int
    temperature: float = 1.0
    max_tokens: int = 256
    max_turns: int = 8
    seq_len: int = 2048
    optimizer: Literal["adamw", "sgd"] = "adamw"
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    # CPU trainer knobs (not part of the agent's config surface).
    clip_low: float = 0.2  # token-level ratio clip: [1 - clip_low, 1 + clip_high]
    clip_high: float = 0.2
    kl_coef: float = 0.0  # > 0: k3 KL estimate to the base model, per token
    epochs: int = 2  # optimizer steps per batch of rollouts
    grad_clip: float = 1.0
    weight_decay: float = 0.0
    drop_zero_advantage: bool = True  # episodes whose group all scored alike carry no gradient
    seed: int = 0
    threads: int = 1
    # Collapse guard: a batch is "collapsed" when it earns no reward at all although the last healthy
    # batches earned at least collapse_reward_rate, or when at least malformed_limit of its rollouts are
    # malformed (ran out of tokens, empty reply) although the first batch's were not.
    collapse_reward_rate: float = 0.15
    malformed_limit: float = 0.5
    max_rollbacks: int = 2  # then training stops on the last healthy weights
    idle_stop: int = 3  # consecutive batches without any gradient signal from the start: stop early
    notes: list[str] = []

    @property
    def tasks_per_step(self) -> int:
        return self.batch_size // self.group_size


def settings_from_job(
    table: PrimeRLTable,
    *,
    lr_scale: float = DEFAULT_LR_SCALE,
    seed: int = 0,
    threads: int = 1,
    kl_coef: float = 0.0,
    epochs: int = 2,
) -> CpuTrainSettings:
    """The CPU run for a validated ``[prime_rl]`` table (bounds were checked at submission)."""
    if table.group_size < 1 or table.batch_size < table.group_size or table.batch_size % table.group_size:
        raise ValueError(
            f"[prime_rl].batch_size = {table.batch_size} must be a positive multiple of group_size = {table.group_size}"
        )
    notes: list[str] = []
    optimizer: Literal["adamw", "sgd"] = "sgd" if table.optimizer == "sgd" else "adamw"
    if table.optimizer == "muon":
        notes.append("optimizer muon: not on CPU, AdamW used")
    if table.algorithm != "grpo":
        notes.append(f"algorithm {table.algorithm}: not on CPU, GRPO (reward - group mean) used")
    if table.loss != "default":
        notes.append(f"loss {table.loss}: not on CPU, the clipped importance-sampling loss used")
    if table.lora_rank:
        notes.append(f"lora_rank {table.lora_rank}: the tiny model is fully fine-tuned")
    lr = table.learning_rate * lr_scale
    notes.append(f"learning_rate {table.learning_rate:g} x {lr_scale:g} (tiny-model scale) = {lr:g}")
    return CpuTrainSettings(
        model=table.model,
        learning_rate=lr,
        max_steps=table.max_steps,
        batch_size=table.batch_size,
        group_size=table.group_size,
        temperature=table.temperature,
        max_tokens=table.max_tokens,
        max_turns=table.max_turns,
        seq_len=table.seq_len,
        optimizer=optimizer,
        scheduler=table.scheduler,
        warmup_steps=table.warmup_steps,
        kl_coef=kl_coef,
        epochs=epochs,
        seed=seed,
        threads=threads,
        notes=notes,
    )
