"""The base model and its LoRA: loading a Qwen3-architecture checkpoint, attaching the adapter, merging it.

The adapter follows Tinker's LoRA: every linear layer of the transformer blocks (attention q/k/v/o and the
MLP's gate/up/down; not the tied embedding / LM head), alpha 32 whatever the rank, no dropout, B initialised
to zero so step 0 is the base model exactly. A (Kaiming-uniform, peft's default) is drawn from a generator
seeded by the run, so the same seed gives the same adapter.

``base_model`` is a tiny model name (``tiny-0.6b``), its Qwen alias (``Qwen/Qwen3-0.6B``), the name of another
checkpoint under ``fixtures/tiny/`` (the replica's trainer agent, ``tiny-agent``) or a local checkpoint directory
(``config.json`` + safetensors + tokenizer): nothing is downloaded.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from torch import Tensor
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from adapters.tiny.model import load_checkpoint
from adapters.tiny.specs import FIXTURE_DIR

__all__ = [
    "LORA_ALPHA",
    "TARGET_MODULES",
    "attach_lora",
    "load_base",
    "lora_state",
    "merged_model",
    "pick_device",
    "set_lora_state",
]

LORA_ALPHA = 32
TARGET_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def pick_device(device: str) -> torch.device:
    """``auto``: the GPU when one is visible, else the CPU; ``cpu`` / ``cuda`` / ``cuda:N`` as given."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"[backend] device = {device!r}, but torch sees no GPU")
    return torch.device(device)


def load_base(base_model: str) -> tuple[Qwen3ForCausalLM, PreTrainedTokenizerFast]:
    """The base model (float32, eval mode, CPU) and its tokenizer."""
    from transformers.utils import logging as hf_logging

    # A "Loading weights" bar per sampler version would flood the run's stderr.
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    fixture = FIXTURE_DIR / base_model
    named = "/" not in base_model and not Path(base_model).exists() and (fixture / "config.json").is_file()
    ckpt = load_checkpoint(fixture if named else base_model)
    return ckpt.model, ckpt.tokenizer


def _config(rank: int) -> LoraConfig:
    return LoraConfig(r=rank, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules=list(TARGET_MODULES), bias="none")


def attach_lora(model: Qwen3ForCausalLM, rank: int, *, seed: int) -> PeftModel:
    """``model`` wrapped with a fresh adapter (A seeded by ``seed``, B = 0); only the adapter is trainable."""
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        # peft asks transformers a deprecated question about gradient checkpointing; not ours to fix.
        warnings.simplefilter("ignore", FutureWarning)
        torch.manual_seed(seed)
        peft_model = get_peft_model(model, _config(rank))
    if not isinstance(peft_model, PeftModel):
        raise TypeError(f"get_peft_model returned {type(peft_model).__name__}")
    return peft_model


def lora_state(model: PeftModel) -> dict[str, Tensor]:
    """The adapter's weights by peft's saved names (``...q_proj.lora_A.weight``), detached copies on the CPU."""
    state: dict[str, Any] = get_peft_model_state_dict(model)
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in state.items()}


def set_lora_state(model: PeftModel, state: Mapping[str, Tensor]) -> None:
    """Load adapter weights saved by :func:`lora_state`; a missing or unexpected adapter key is an error."""
    expected = set(get_peft_model_state_dict(model))
    if set(state) != expected:
        missing, extra = sorted(expected - set(state)), sorted(set(state) - expected)
        raise ValueError(f"LoRA weights do not fit the model: missing {missing[:3]}, unexpected {extra[:3]}")
    result = set_peft_model_state_dict(model, dict(state))
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise ValueError(f"LoRA weights do not fit the model: unexpected {unexpected[:3]}")


@torch.no_grad()
def merged_model(base_model: str, state: Mapping[str, Tensor] | None, rank: int) -> Qwen3ForCausalLM:
    """A fresh copy of the base model with the adapter ``state`` merged into its weights (the sampler's model);
    the base model itself when ``state`` is None (sampler version 0)."""
    model, _tok = load_base(base_model)
    if state is None:
        return model
    peft_model = attach_lora(model, rank, seed=0)
    set_lora_state(peft_model, state)
    merged = peft_model.merge_and_unload()
    if not isinstance(merged, Qwen3ForCausalLM):
        raise TypeError(f"merging the adapter gave {type(merged).__name__}, expected Qwen3ForCausalLM")
    merged.train(False)
    return merged
