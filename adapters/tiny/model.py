"""The two tiny Qwen3 models: their sizes, construction, and checkpoints on disk.

``tiny-0.6b`` and ``tiny-1.7b`` stand in for ``Qwen/Qwen3-0.6B`` and ``Qwen/Qwen3-1.7B``: same
architecture (transformers ``Qwen3ForCausalLM``: RMSNorm, GQA with q/k norms, SwiGLU, RoPE, tied
embeddings), a few hundred thousand / a few million parameters. A checkpoint directory holds
``model.safetensors`` + ``config.json`` (``save_pretrained``), the tokenizer files, and ``meta.json``
(how it was made and its measured base scores).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from .specs import BASE_MODEL_ALIASES, FIXTURE_DIR, MODEL_SPECS, ModelSpec, resolve_model_name

__all__ = [
    "BASE_MODEL_ALIASES",
    "FIXTURE_DIR",
    "MODEL_SPECS",
    "Checkpoint",
    "ModelSpec",
    "build_model",
    "grow_model",
    "load_checkpoint",
    "resolve_model_name",
    "save_checkpoint",
]


def build_model(spec: ModelSpec, tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen3ForCausalLM:
    """A freshly initialised model for ``tokenizer``'s vocabulary (seeded, float32)."""
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    return model


@torch.no_grad()
def grow_model(small: Qwen3ForCausalLM, spec: ModelSpec, seed: int) -> Qwen3ForCausalLM:
    """A deeper, wider model computing exactly what ``small`` computes (function-preserving growth).

    ``small``'s layers are copied into the first layers; each MLP gains neurons whose output weights
    are zero, and the added layers have zero attention-output and MLP-output weights, so every new
    part starts as a no-op on the residual stream and training grows it from there. The larger base
    then starts from the smaller one's skill (as a larger pre-trained model starts from more compute).
    """
    old = small.config
    if spec.hidden_size != old.hidden_size or spec.num_heads != old.num_attention_heads:
        raise ValueError("growth keeps the hidden size and the attention heads")
    if spec.num_kv_heads != old.num_key_value_heads or spec.head_dim != old.head_dim:
        raise ValueError("growth keeps the key/value heads and the head size")
    if spec.num_layers < old.num_hidden_layers or spec.intermediate_size < old.intermediate_size:
        raise ValueError("growth cannot remove layers or MLP neurons")
    config = Qwen3Config.from_dict(old.to_dict())
    config.num_hidden_layers = spec.num_layers
    config.intermediate_size = spec.intermediate_size
    config.layer_types = ["full_attention"] * spec.num_layers
    torch.manual_seed(seed)
    big = Qwen3ForCausalLM(config)
    src, dst = small.state_dict(), big.state_dict()
    width = old.intermediate_size
    for name, tensor in dst.items():
        if name.startswith("model.layers."):
            index = int(name.split(".")[2])
            if index >= old.num_hidden_layers:
                if name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
                    tensor.zero_()  # a new layer adds nothing to the residual stream at first
                continue
        source = src[name]
        if name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")):
            tensor[:width].copy_(source)
        elif name.endswith("mlp.down_proj.weight"):
            tensor.zero_()
            tensor[:, :width].copy_(source)
        else:
            tensor.copy_(source)
    big.load_state_dict(dst)
    return big


class Checkpoint:
    """A loaded model + tokenizer (+ the ``meta.json`` record) ready to generate on the CPU."""

    def __init__(
        self,
        name: str,
        model: Qwen3ForCausalLM,
        tokenizer: PreTrainedTokenizerFast,
        path: Path | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.path = path
        self.meta = meta or {}

    def __repr__(self) -> str:
        return f"Checkpoint({self.name!r}, path={self.path}, params={self.num_parameters()})"

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def _drop_load_state(path: Path) -> None:
    """A tokenizer loaded from disk saves how it was loaded (``is_local``...): not part of the checkpoint."""
    config = json.loads(path.read_text())
    for key in ("is_local", "local_files_only"):
        config.pop(key, None)
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def save_checkpoint(ckpt: Checkpoint, directory: Path, meta: dict[str, Any] | None = None) -> Path:
    """Write model, tokenizer and ``meta.json`` to ``directory`` (created)."""
    directory.mkdir(parents=True, exist_ok=True)
    ckpt.model.save_pretrained(directory, safe_serialization=True)
    ckpt.tokenizer.save_pretrained(directory)
    _drop_load_state(directory / "tokenizer_config.json")
    record = meta if meta is not None else ckpt.meta
    (directory / "meta.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return directory


def load_checkpoint(name_or_path: str | Path, *, train: bool = False) -> Checkpoint:
    """A checkpoint by model name (``tiny-0.6b``, or its Qwen alias) or directory path."""
    path = Path(name_or_path)
    if not (path / "config.json").exists():
        try:
            path = FIXTURE_DIR / resolve_model_name(str(name_or_path))
        except KeyError:
            raise FileNotFoundError(f"{name_or_path}: not a checkpoint directory nor a known tiny model") from None
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path}: checkpoint missing (run python -m adapters.tiny.pretrain)")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    model = Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    model.train(train)  # eval mode by default: no dropout, deterministic sampling
    meta_path = path / "meta.json"
    meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    name = str(meta.get("name", path.name))
    return Checkpoint(name, model, tokenizer, path, meta)
