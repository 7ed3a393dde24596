"""Model specs, names and function-preserving growth."""

from __future__ import annotations

import msgspec
import pytest

from .conftest import TINY_FIXTURES, TINY_MODELS, micro_spec


def test_aliases_resolve_both_ways():
    from adapters.tiny.model import BASE_MODEL_ALIASES, FIXTURE_DIR, MODEL_SPECS, resolve_model_name

    assert FIXTURE_DIR == TINY_FIXTURES
    assert tuple(MODEL_SPECS) == TINY_MODELS
    for name, spec in MODEL_SPECS.items():
        assert resolve_model_name(name) == name
        assert resolve_model_name(spec.stands_in_for) == name
        assert resolve_model_name(spec.stands_in_for.lower()) == name
    assert set(BASE_MODEL_ALIASES) == {"Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"}
    with pytest.raises(KeyError, match="unknown tiny model"):
        resolve_model_name("Qwen/Qwen3-8B")


def test_growth_preserves_the_function_and_adds_parameters(micro_ckpt):
    import torch

    from adapters.tiny.model import grow_model

    bigger = msgspec.structs.replace(micro_spec(), num_layers=3, intermediate_size=96)
    grown = grow_model(micro_ckpt.model, bigger, seed=1)
    grown.train(False)
    ids = torch.randint(0, len(micro_ckpt.tokenizer), (3, 20))
    with torch.no_grad():
        assert torch.equal(grown(input_ids=ids).logits, micro_ckpt.model(input_ids=ids).logits)
    assert sum(p.numel() for p in grown.parameters()) > sum(p.numel() for p in micro_ckpt.model.parameters())
    assert grown.config.num_hidden_layers == 3 and grown.config.intermediate_size == 96
    # The new parts are trainable: a gradient step changes the function.
    loss = grown(input_ids=ids, labels=ids).loss
    loss.backward()
    assert float(grown.model.layers[2].self_attn.o_proj.weight.grad.abs().sum()) > 0


def test_growth_refuses_to_shrink(micro_ckpt):
    from adapters.tiny.model import grow_model

    micro = micro_spec()
    with pytest.raises(ValueError, match="cannot remove"):
        grow_model(micro_ckpt.model, msgspec.structs.replace(micro, intermediate_size=32), seed=0)
    with pytest.raises(ValueError, match="hidden size"):
        grow_model(micro_ckpt.model, msgspec.structs.replace(micro, hidden_size=64), seed=0)
