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


def test_stage1_keeps_triage_out_and_stage2_covers_every_family():
    from adapters.tiny.pretrain import DEFAULTS, SFT_FAMILIES, STAGE2

    assert "triage" in FAMILIES and "triage" not in SFT_FAMILIES
    for settings in DEFAULTS.values():  # stage 1, as committed under fixtures/tiny/stage1
        assert set(settings.family_noise) <= set(SFT_FAMILIES)
        assert all(0 < r < 1 for r in settings.family_noise.values())
    for settings in STAGE2.values():
        assert set(settings.family_weights) == set(FAMILIES)
        assert settings.family_weights["triage"] == max(settings.family_weights.values())
        assert settings.family_noise["triage"] == 0.0  # far from saturating: no mistakes planted
        assert settings.copy_steps == 0  # continues a trained model: its stage-1 one, or the small stage-2 one
    assert STAGE2["tiny-0.6b"].grow_from is None and STAGE2["tiny-1.7b"].grow_from == "tiny-0.6b"


def test_readme_lists_every_model_family_and_the_agent():
    from adapters.tiny.pretrain import DEFAULTS, STAGE2, readme

    scores = {f: {"t1": 0.25, "greedy": 0.5, "answered_t1": 1.0} for f in FAMILIES}
    stage1 = {"train": msgspec.structs.asdict(DEFAULTS["tiny-0.6b"]), "final_loss": 0.2, "train_cpu_s": 2.0}
    metas = [
        {
            "name": n,
            "stands_in_for": f"Qwen/{n}",
            "parameters": 1000,
            "seed": 0,
            "command": "python -m adapters.tiny.pretrain",
            "sft_families": list(FAMILIES),
            "stage1": {**stage1, "sft_families": ["calc_chain"]},
            "train": msgspec.structs.asdict(STAGE2["tiny-0.6b"]),
            "final_loss": 0.1,
            "train_cpu_s": 1.0,
            "base_scores": scores,
        }
        for n in ("a", "b")
    ]
    agent = {
        "name": "tiny-agent",
        "parameters": 1000,
        "seed": 0,
        "init": "stage1/tiny-0.6b",
        "command": "python -m adapters.tiny.agent",
        "settings": {"steps": 3, "lr": 0.001, "warmup": 1, "repeats": 1},
        "final_loss": 0.01,
        "train_cpu_s": 1.0,
        "tasks": ["calc_chain_v1_fast"],
        "transcripts": 8,
        "transcript_tokens": {"min": 10, "max": 20},
        "transcripts_fingerprint": "abc",
        "measured": {"text": "97% submitted"},
    }
    text = readme([*metas, agent])
    assert "## a (stands in for Qwen/a)" in text and "## b" in text
    assert all(f"| {f} | 0.250 | 0.500 |" in text for f in FAMILIES)
    assert "stage 1 (committed under stage1/)" in text and "Not in the SFT data" not in text
    assert "## tiny-agent" in text and "fingerprint abc" in text and "97% submitted" in text
