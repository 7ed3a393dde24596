"""The local learner's checkpoints on disk, under the run directory, written atomically.

Paths are strings relative to the run directory with a ``local:`` prefix (so a run directory can move):

- ``local:checkpoints/<name>.sampler``: sampler weights, a directory with ``lora.safetensors`` (the adapter)
  and ``meta.json``; what the sampler server merges into the base model.
- ``local:checkpoints/<name>.state``: resumable training state, the same two files plus ``adam.safetensors``
  (each adapter weight's ``exp_avg``, ``exp_avg_sq`` and ``step``), like Tinker's
  ``create_training_client_from_state_with_optimizer`` restores weights + Adam state. Only a state path resumes.

A checkpoint directory is written under a temporary name and renamed into place (a crash leaves the old one or
the new one, never half of one); saving a name again (after a resume) replaces it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file
from torch import Tensor

from engine.atomic import fsync_dir

__all__ = [
    "LOCAL_PREFIX",
    "SAMPLER_SUFFIX",
    "STATE_SUFFIX",
    "CheckpointError",
    "read_checkpoint",
    "resolve",
    "write_checkpoint",
]

LOCAL_PREFIX = "local:"
STATE_SUFFIX = ".state"
SAMPLER_SUFFIX = ".sampler"
_LORA, _ADAM, _META = "lora.safetensors", "adam.safetensors", "meta.json"


class CheckpointError(ValueError):
    """A checkpoint path that is not a local one, or a checkpoint that is missing or does not fit."""


def resolve(root: Path, path: str) -> Path:
    """The directory of checkpoint ``path`` under run directory ``root``."""
    if not path.startswith(LOCAL_PREFIX):
        raise CheckpointError(f"local learner: {path!r} is not a local checkpoint ({LOCAL_PREFIX}...)")
    rel = Path(path[len(LOCAL_PREFIX) :])
    if rel.is_absolute() or ".." in rel.parts:
        raise CheckpointError(f"local learner: {path!r} must stay inside the run directory")
    return root / rel


def write_checkpoint(
    root: Path,
    path: str,
    *,
    lora: Mapping[str, Tensor],
    meta: Mapping[str, Any],
    adam: Mapping[str, Tensor] | None = None,
) -> Path:
    """Write one checkpoint directory atomically (see the module doc)."""
    final = resolve(root, path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".partial"))
    try:
        save_file(dict(lora), str(tmp / _LORA))
        if adam is not None:
            save_file(dict(adam), str(tmp / _ADAM))
        (tmp / _META).write_text(json.dumps(dict(meta), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for f in tmp.iterdir():
            with f.open("rb") as fh:
                os.fsync(fh.fileno())
        if final.exists():  # saved again after a resume: the new one wins
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(final.parent)
    return final


def read_checkpoint(
    root: Path, path: str, *, with_state: bool
) -> tuple[dict[str, Tensor], dict[str, Any], dict[str, Tensor] | None]:
    """``(lora, meta, adam)`` of checkpoint ``path``; ``with_state`` requires a state checkpoint (Adam inside)."""
    directory = resolve(root, path)
    if with_state and not path.endswith(STATE_SUFFIX):
        raise CheckpointError(f"local learner: {path!r} is not a state checkpoint (*{STATE_SUFFIX}): cannot resume")
    if not (directory / _LORA).is_file() or not (directory / _META).is_file():
        raise CheckpointError(f"local learner: checkpoint {path!r} not found under {root}")
    lora = load_file(str(directory / _LORA))
    meta: dict[str, Any] = json.loads((directory / _META).read_text(encoding="utf-8"))
    adam = load_file(str(directory / _ADAM)) if with_state else None
    return lora, meta, adam
