"""Turning prime-rl's final weight broadcast into something ``vllm serve`` loads.

With ``weight_broadcast = filesystem`` the trainer writes each policy version to
``<run dir>/broadcasts/step_<N>/`` and marks it complete with a ``STABLE`` file: HF-format safetensors
for a full fine-tune (weights only: no config.json, no tokenizer), or ``adapter_model.safetensors`` +
``adapter_config.json`` for LoRA. A LoRA directory is served as is (``--lora-modules``). A full
fine-tune gets a servable directory: symlinks to the base model's non-weight files from the local
Hugging Face cache (prime-rl downloaded the base before training) plus symlinks to the new weights.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["final_broadcast", "find_hf_snapshot", "is_lora_dir", "latest_stable_broadcast", "make_servable_dir"]

_STEP = re.compile(r"^step_(\d+)$")
_WEIGHT_FILE = re.compile(r".*\.safetensors$|.*\.safetensors\.index\.json$|.*\.bin$|.*\.pt$")


def final_broadcast(run_dir: Path, max_steps: int) -> Path | None:
    """``broadcasts/step_<max_steps>`` if it is complete (has ``STABLE``), else None."""
    path = run_dir / "broadcasts" / f"step_{max_steps}"
    return path if (path / "STABLE").is_file() else None


def latest_stable_broadcast(run_dir: Path) -> tuple[int, Path] | None:
    steps = []
    for p in (run_dir / "broadcasts").glob("step_*"):
        m = _STEP.match(p.name)
        if m and (p / "STABLE").is_file():
            steps.append((int(m.group(1)), p))
    return max(steps) if steps else None


def is_lora_dir(path: Path) -> bool:
    return (path / "adapter_config.json").is_file()


def find_hf_snapshot(model_id: str, hf_home: Path | None = None) -> Path | None:
    """The cached snapshot directory of ``model_id`` (``HF_HOME/hub/models--org--name/snapshots/<rev>``).

    ``refs/main`` names the revision when present; otherwise the only (or newest) snapshot is used.
    """
    home = hf_home or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    repo = home / "hub" / ("models--" + model_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        candidate = snapshots / ref.read_text().strip()
        if candidate.is_dir():
            return candidate
    found = sorted((p for p in snapshots.glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def make_servable_dir(weights_dir: Path, base_snapshot: Path, out: Path) -> Path:
    """``out`` with the base's config/tokenizer files and ``weights_dir``'s weights, all as symlinks."""
    out.mkdir(parents=True, exist_ok=True)
    for src in sorted(base_snapshot.iterdir()):
        if src.is_file() and not _WEIGHT_FILE.match(src.name):
            (out / src.name).symlink_to(src.resolve())
    for src in sorted(weights_dir.iterdir()):
        if src.is_file() and src.name != "STABLE" and not (out / src.name).exists():
            (out / src.name).symlink_to(src.resolve())
    if not any(_WEIGHT_FILE.match(p.name) for p in out.iterdir()):
        raise FileNotFoundError(f"{weights_dir}: no weight files to serve")
    return out
