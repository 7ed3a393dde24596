"""The job a trainer agent submits: ``job.toml`` and its ``[prime_rl]`` table, checked against a task's bounds.

The ``[prime_rl]`` table is the config surface the agent may tune. Every key is known; every value must
lie inside the task spec's bounds. Errors name the file, the line and the key (``job.toml:4: [prime_rl].batch_size:
Expected `int`, got `str```; ``job.toml: [prime_rl].learning_rate = 0.03: outside the task's range``) so the
agent can fix them from the message alone. A byte that is not UTF-8 is such an error too, with its line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from engine.tomlfile import TomlError, decode_toml, field_error
from families.spec import Bounds

__all__ = [
    "ALGORITHMS",
    "LOSSES",
    "OPTIMIZERS",
    "SCHEDULERS",
    "JobConfig",
    "JobConfigError",
    "PrimeRLTable",
    "check_bounds",
    "load_job_config",
    "parse_job_config",
]

OPTIMIZERS = ("adamw", "sgd", "muon")
SCHEDULERS = ("constant", "linear", "cosine")
LOSSES = ("default", "ipo")
ALGORITHMS = ("grpo", "max_rl", "rae")


class JobConfigError(ValueError):
    """A job.toml that cannot run; the message names the file and the key."""


class PrimeRLTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """``[prime_rl]``: what the agent chooses. Defaults are prime-rl's own where it has one."""

    model: str
    learning_rate: float
    max_steps: int
    batch_size: int
    group_size: int
    temperature: float = 1.0
    max_tokens: int = 256
    optimizer: Literal["adamw", "sgd", "muon"] = "adamw"
    algorithm: Literal["grpo", "max_rl", "rae"] = "grpo"
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    loss: Literal["default", "ipo"] = "default"
    lora_rank: int = 0  # 0: full fine-tune
    seq_len: int = 2048
    max_turns: int = 8


class EnvTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """``[env]``: where the agent's verifiers environment package is, inside the workspace."""

    id: str  # the env id, e.g. "calc-train"; module name = id with '-' -> '_'
    path: str = "env"  # package directory relative to the workspace
    num_tasks: int = 0  # 0: the taskset's own default


class JobConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    prime_rl: PrimeRLTable
    env: EnvTable


def parse_job_config(text: str | bytes, source: str = "job.toml") -> JobConfig:
    """Parse job.toml's text (or bytes): errors are one line naming the file, the line and the key.

    Types are strict: ``learning_rate = "3e-5"`` is a string where a number belongs, never coerced.
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    try:
        doc: dict[str, Any] = decode_toml(data, source)
    except TomlError as exc:
        raise JobConfigError(str(exc)) from None
    try:
        return msgspec.convert(doc, JobConfig)
    except msgspec.ValidationError as exc:
        raise JobConfigError(field_error(exc, data.decode("utf-8"), source)) from None


def load_job_config(path: Path | str) -> JobConfig:
    p = Path(path)
    return parse_job_config(p.read_bytes(), str(p))


def check_bounds(cfg: PrimeRLTable, bounds: Bounds, source: str = "job.toml") -> list[str]:
    """Every way ``cfg`` breaks ``bounds`` (empty when it fits), each naming the key."""
    errs: list[str] = []

    def out(key: str, value: object, why: str) -> None:
        errs.append(f"{source}: [prime_rl].{key} = {value!r}: {why}")

    if cfg.model not in bounds.base_models:
        out("model", cfg.model, f"not one of the task's base models {bounds.base_models}")
    lr = bounds.learning_rate
    if not lr.min <= cfg.learning_rate <= lr.max:
        out("learning_rate", cfg.learning_rate, f"outside the task's range [{lr.min:g}, {lr.max:g}]")
    if not 1 <= cfg.max_steps <= bounds.max_steps:
        out("max_steps", cfg.max_steps, f"must be in [1, {bounds.max_steps}]")
    bs, gs = bounds.batch_size, bounds.group_size
    if not bs.min <= cfg.batch_size <= bs.max:
        out("batch_size", cfg.batch_size, f"outside the task's range [{bs.min}, {bs.max}]")
    if not gs.min <= cfg.group_size <= gs.max:
        out("group_size", cfg.group_size, f"outside the task's range [{gs.min}, {gs.max}]")
    if cfg.group_size > 0 and cfg.batch_size % cfg.group_size:
        out("batch_size", cfg.batch_size, f"must be a multiple of group_size ({cfg.group_size})")
    if not 0.0 < cfg.temperature <= 2.0:
        out("temperature", cfg.temperature, "must be in (0, 2]")
    if not 1 <= cfg.max_tokens <= cfg.seq_len:
        out("max_tokens", cfg.max_tokens, f"must be in [1, seq_len={cfg.seq_len}]")
    if not 1 <= cfg.seq_len <= bounds.seq_len:
        out("seq_len", cfg.seq_len, f"must be in [1, {bounds.seq_len}]")
    if cfg.warmup_steps != 0 and not 0 <= cfg.warmup_steps < cfg.max_steps:
        out("warmup_steps", cfg.warmup_steps, f"must be in [0, max_steps={cfg.max_steps})")
    if cfg.lora_rank < 0 or cfg.lora_rank > 256:
        out("lora_rank", cfg.lora_rank, "must be 0 (full fine-tune) or in [1, 256]")
    if not 1 <= cfg.max_turns <= 32:
        out("max_turns", cfg.max_turns, "must be in [1, 32]")
    return errs
