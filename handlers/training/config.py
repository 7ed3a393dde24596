"""The outer loop's run config (``[outer]`` in a run TOML): validated on load, errors name the key.

Seed setup: Qwen3.6-35B-A3B, LoRA rank 8, lr 4e-5, importance-sampling GRPO, group size 8, 5 tasks per
batch (40 episodes), at most 2 steps off-policy; a group at its last fresh step may train with 6 of its 8
episodes (``min_group_fraction``).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Annotated, Any

import msgspec

from families import HELD_OUT_FAMILIES, TRAINING_FAMILIES
from handlers.training.loss import LOSSES

__all__ = ["ConfigError", "OuterConfig", "load_config", "parse_config"]


class ConfigError(ValueError):
    """The outer-loop config is invalid; the message names the file and the key."""


_Pos = Annotated[int, msgspec.Meta(ge=1)]


class OuterConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    base_model: str = "Qwen/Qwen3.6-35B-A3B"
    lora_rank: _Pos = 8
    learning_rate: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 4e-5
    loss_fn: str = "importance_sampling"
    # ppo / cispo ratio bounds (sent as loss_fn_config); ignored by the other losses.
    clip_low: Annotated[float, msgspec.Meta(gt=0.0)] = 0.8
    clip_high: Annotated[float, msgspec.Meta(gt=0.0)] = 1.2
    group_size: Annotated[int, msgspec.Meta(ge=2)] = 8  # a group of 1 has advantage 0 everywhere
    tasks_per_batch: _Pos = 5
    max_steps_off_policy: Annotated[int, msgspec.Meta(ge=0)] = 2
    # 34 slots: ~3.1x the synchronous loop's throughput with <= 2% of started episodes discarded on every seed
    # of benchmarks/outer_sim.py (40: ~3.7x but ~2.5-2.9% discarded, each a paid inner job); docs/performance.md.
    episode_concurrency: _Pos = 34
    max_tokens: _Pos = 4096  # per sampled turn
    temperature: Annotated[float, msgspec.Meta(ge=0.0)] = 1.0
    families: list[str] = msgspec.field(default_factory=lambda: list(TRAINING_FAMILIES))
    seed: int = 0
    save_every: Annotated[int, msgspec.Meta(ge=0)] = 1  # state checkpoint every N steps (0: only sampler)
    # A group still running at its last fresh step trains without its stragglers if at least this share of its
    # episodes has finished (never fewer than 2: a group of 1 has no baseline); 1.0: groups train whole only.
    min_group_fraction: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 0.75
    max_steps: _Pos = 100

    @property
    def batch_size(self) -> int:
        """Episodes per learner step."""
        return self.tasks_per_batch * self.group_size

    @property
    def min_group_episodes(self) -> int:
        """The fewest finished episodes a group may train with when closed short (``group_size``: never)."""
        return min(self.group_size, max(2, math.ceil(self.min_group_fraction * self.group_size - 1e-9)))

    def __post_init__(self) -> None:
        if self.loss_fn not in LOSSES:
            raise ValueError(f"loss_fn: {self.loss_fn!r} is not one of {', '.join(LOSSES)}")
        if self.clip_low >= 1.0 or self.clip_high <= 1.0:
            raise ValueError("clip_low/clip_high: need clip_low < 1 < clip_high")
        if self.episode_concurrency < self.group_size:
            raise ValueError(
                f"episode_concurrency: {self.episode_concurrency} < group_size {self.group_size} (a group starts whole)"
            )
        if not self.families:
            raise ValueError("families: at least one training family is needed")
        for fam in self.families:
            if fam in HELD_OUT_FAMILIES:
                raise ValueError(f"families: {fam!r} is held out and never trained on")
            if fam not in TRAINING_FAMILIES:
                raise ValueError(f"families: unknown family {fam!r}; known: {', '.join(TRAINING_FAMILIES)}")
        if len(set(self.families)) != len(self.families):
            raise ValueError("families: duplicates")
        if not self.base_model:
            raise ValueError("base_model: must not be empty")


def parse_config(data: dict[str, Any], *, source: str = "<config>") -> OuterConfig:
    """An :class:`OuterConfig` from a mapping (the ``[outer]`` table), or :class:`ConfigError` naming the key."""
    try:
        return msgspec.convert(data, OuterConfig)
    except (msgspec.ValidationError, ValueError) as exc:
        # msgspec says "... - at `$.lora_rank`"; __post_init__ messages start with the key.
        raise ConfigError(f"{source}: [outer] {exc}") from exc


def load_config(path: Path) -> OuterConfig:
    """Read ``path`` (TOML) and validate its ``[outer]`` table (missing table: all defaults)."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    table = doc.get("outer", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [outer] must be a table")
    return parse_config(table, source=str(path))
