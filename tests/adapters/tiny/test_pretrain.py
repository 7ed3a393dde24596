"""The pre-training script's pieces, at toy sizes: tokenizer build, induction warm-up + SFT, records."""

from __future__ import annotations

import json
import math

import msgspec

from families import FAMILIES

from .conftest import micro_spec


def test_tokenizer_build_is_deterministic():
    from adapters.tiny.pretrain import build_tokenizer

    a = build_tokenizer(3, per_family=8, vocab_size=300)
    b = build_tokenizer(3, per_family=8, vocab_size=300)
    assert a.get_vocab() == b.get_vocab()
    assert len(a) == 300


def test_sft_runs_saves_and_reloads(tmp_path):
    from adapters.tiny.model import load_checkpoint, save_checkpoint
    from adapters.tiny.pretrain import TrainSettings, build_tokenizer, sft_model

    tok = build_tokenizer(0, per_family=8, vocab_size=300)
    settings = TrainSettings(steps=3, batch=2, lr=1e-3, warmup=1, noise=0.5, copy_steps=2, copy_batch=2)
    ckpt, history = sft_model(micro_spec(), tok, settings, seed=0, families=("calc_chain",))
    assert [h["step"] for h in history] == [1, 2, 3]
    assert all(math.isfinite(h["loss"]) for h in history)
    meta = {"name": "micro", "seed": 0, "train": settings.as_dict()}
    save_checkpoint(ckpt, tmp_path / "micro", meta)
    again = load_checkpoint(tmp_path / "micro")
    assert again.meta == json.loads(json.dumps(meta))
    assert again.tokenizer.get_vocab() == tok.get_vocab()
    for (name, p), (_, q) in zip(ckpt.model.state_dict().items(), again.model.state_dict().items(), strict=True):
        assert bool((p == q).all()), name


def test_defaults_keep_the_held_out_family_out_of_sft():
    from adapters.tiny.pretrain import DEFAULTS, SFT_FAMILIES

    held_out = [name for name in FAMILIES if name == "triage"]
    assert held_out and not set(held_out) & set(SFT_FAMILIES)
    for settings in DEFAULTS.values():
        assert set(settings.family_noise) <= set(SFT_FAMILIES)
        assert all(0 < r < 1 for r in settings.family_noise.values())


def test_readme_lists_every_model_and_family():
    from adapters.tiny.pretrain import DEFAULTS, SFT_FAMILIES, readme

    scores = {f: {"t1": 0.25, "greedy": 0.5, "answered_t1": 1.0} for f in FAMILIES}
    metas = [
        {
            "name": n,
            "stands_in_for": f"Qwen/{n}",
            "parameters": 1000,
            "seed": 0,
            "command": "python -m adapters.tiny.pretrain",
            "sft_families": list(SFT_FAMILIES),
            "train": msgspec.structs.asdict(DEFAULTS["tiny-0.6b"]),
            "final_loss": 0.1,
            "train_cpu_s": 1.0,
            "base_scores": scores,
        }
        for n in ("a", "b")
    ]
    text = readme(metas)
    assert "## a (stands in for Qwen/a)" in text and "## b" in text
    assert all(f"| {f} | 0.250 | 0.500 |" in text for f in FAMILIES)
