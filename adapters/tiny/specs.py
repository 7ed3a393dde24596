"""The two tiny models' names, sizes and where their checkpoints live: plain data, no torch.

Split from :mod:`.model` so that what only needs a name or a size (parametrized tests at collection, a config
check) does not load torch and transformers.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

__all__ = ["BASE_MODEL_ALIASES", "FIXTURE_DIR", "MODEL_SPECS", "ModelSpec", "resolve_model_name"]

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    stands_in_for: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int


MODEL_SPECS: dict[str, ModelSpec] = {
    "tiny-0.6b": ModelSpec(
        name="tiny-0.6b",
        stands_in_for="Qwen/Qwen3-0.6B",
        hidden_size=128,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=32,
        intermediate_size=512,
    ),
    "tiny-1.7b": ModelSpec(
        name="tiny-1.7b",
        stands_in_for="Qwen/Qwen3-1.7B",
        hidden_size=128,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        head_dim=32,
        intermediate_size=768,
    ),
}
BASE_MODEL_ALIASES: dict[str, str] = {spec.stands_in_for: name for name, spec in MODEL_SPECS.items()}


def resolve_model_name(name: str) -> str:
    """``tiny-0.6b`` for ``tiny-0.6b`` or ``Qwen/Qwen3-0.6B`` (case-insensitive); KeyError otherwise."""
    lowered = {k.lower(): v for k, v in BASE_MODEL_ALIASES.items()}
    for candidate in (name, name.lower()):
        if candidate in MODEL_SPECS:
            return candidate
        if candidate in lowered:
            return lowered[candidate]
    known = ", ".join([*MODEL_SPECS, *BASE_MODEL_ALIASES])
    raise KeyError(f"unknown tiny model {name!r}; known: {known}")
