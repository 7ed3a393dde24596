"""adapters.vllm.weights: prime-rl's final broadcast -> something vLLM serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.vllm.weights import (
    final_broadcast,
    find_hf_snapshot,
    is_lora_dir,
    latest_stable_broadcast,
    make_servable_dir,
)


def test_final_broadcast_needs_the_stable_marker(tmp_path: Path) -> None:
    step = tmp_path / "broadcasts" / "step_5"
    step.mkdir(parents=True)
    assert final_broadcast(tmp_path, 5) is None
    (step / "STABLE").touch()
    assert final_broadcast(tmp_path, 5) == step
    (tmp_path / "broadcasts" / "step_12").mkdir()  # not stable: ignored
    assert latest_stable_broadcast(tmp_path) == (5, step)


def test_snapshot_by_ref_then_newest(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-0.6B"
    (repo / "snapshots" / "aaa").mkdir(parents=True)
    (repo / "snapshots" / "bbb").mkdir()
    assert find_hf_snapshot("Qwen/Qwen3-0.6B", tmp_path) in {repo / "snapshots" / "aaa", repo / "snapshots" / "bbb"}
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("aaa\n")
    assert find_hf_snapshot("Qwen/Qwen3-0.6B", tmp_path) == repo / "snapshots" / "aaa"
    assert find_hf_snapshot("Qwen/Qwen3-1.7B", tmp_path) is None


def test_servable_dir_takes_config_from_base_and_weights_from_training(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    for name, data in {
        "config.json": "{}",
        "tokenizer.json": "{}",
        "model.safetensors": "OLD",
        "model.safetensors.index.json": "{}",
    }.items():
        (base / name).write_text(data)
    trained = tmp_path / "broadcasts" / "step_3"
    trained.mkdir(parents=True)
    (trained / "model-00001-of-00002.safetensors").write_text("NEW1")
    (trained / "model-00002-of-00002.safetensors").write_text("NEW2")
    (trained / "STABLE").touch()
    out = make_servable_dir(trained, base, tmp_path / "served")
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "tokenizer.json",
    ]
    assert (out / "model-00001-of-00002.safetensors").read_text() == "NEW1"
    assert not is_lora_dir(trained)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no weight files"):
        make_servable_dir(empty, base, tmp_path / "served2")
