"""Shared fixtures: a random-init micro checkpoint (fast, no fixture files) for protocol-level tests.

torch and transformers load inside the fixtures, not at collection (issue 18)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

from adapters.tiny.specs import FIXTURE_DIR, MODEL_SPECS, ModelSpec
from families import get_family

if TYPE_CHECKING:
    from adapters.tiny.model import Checkpoint

# Where the trained tiny checkpoints live, and their names (for parametrize at collection): torch-free.
TINY_FIXTURES = FIXTURE_DIR
TINY_MODELS = tuple(MODEL_SPECS)


def micro_spec() -> ModelSpec:
    return ModelSpec(
        name="micro",
        stands_in_for="none",
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
    )


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def micro_ckpt() -> Checkpoint:
    from tokenizers import Tokenizer, models

    from adapters.tiny.chat import render_text
    from adapters.tiny.model import Checkpoint, build_model
    from adapters.tiny.tokenizer import train_tokenizer, wrap_tokenizer
    from adapters.tiny.traces import trace_messages

    renderer = wrap_tokenizer(Tokenizer(models.BPE()))
    rng = random.Random(0)
    texts = []
    for name in ("calc_chain", "ledger"):
        fam = get_family(name)
        for seed in range(40):
            messages = trace_messages(fam, fam.generate("train", seed), rng, 0.3)
            texts.append(render_text(renderer, messages, fam.tool_schemas(), add_generation_prompt=False))
    tokenizer = train_tokenizer(texts, vocab_size=400)
    model = build_model(micro_spec(), tokenizer, seed=0)
    model.eval()
    return Checkpoint("micro", model, tokenizer)
