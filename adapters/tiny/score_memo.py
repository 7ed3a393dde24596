"""Scores of tiny checkpoints by content, kept on disk so that no process on this machine takes one twice.

A tiny model's score is a pure function of what it is computed from: the weights, the checkpoint's other files
(tokenizer, chat template, config), the family, the eval key's hidden (or dev) tasks, the sampling settings and
seed, and the code and libraries that sample and score. The same score was taken again and again:
``ait baselines --inner cpu`` scores each base on each family, then every pod scored the same base again as
its jobs' ``pre``; and jobs with the same job.toml, env and base train to bit-identical weights (training is
seeded and deterministic), so each such job's ``post`` scored the same weights again (the CPU replica: 17
distinct trained models among its 96 jobs, docs/performance.md). :class:`ScoreMemo` keeps each score under a
key that hashes *all* of those inputs (every tensor's bytes as loaded, not a path; the source of
``adapters.tiny`` and ``families``; the versions of torch, transformers and the tokenizer's libraries), so a
changed input is a miss, never a stale hit, and a hit is the number the scorer would compute.

Written and read only by trusted processes (the pod agent's trainer, ``ait baselines``): the agent's code
trains in a confined child that cannot reach this directory, and the weights it returns are keyed by their own
bytes (to be served a score, they must *be* weights that were scored). Under ``--unsafe-no-sandbox`` on a host
without bubblewrap nothing is confined, this directory no more than the eval key: that opt-in is recorded in the
run, and its scores are only as good as the agent's code is honest.

Where: ``$AIT_SCORE_MEMO_DIR``, else ``$XDG_CACHE_HOME/ait/scores``, else ``~/.cache/ait/scores``;
``AIT_SCORE_MEMO_DIR=off`` turns it off. One small JSON file per score, written atomically; a file that does not
decode is a miss (logged) and is written again.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec
import structlog

from engine.atomic import write_atomic

if TYPE_CHECKING:
    from torch.nn import Module

    from .model import Checkpoint
    from .scorer import ScoreReport

__all__ = ["MEMO_ENV", "ScoreMemo", "memo_key"]

log = structlog.get_logger(__name__)

MEMO_ENV = "AIT_SCORE_MEMO_DIR"
_OFF = ("off", "0", "none")
# The checkpoint's files a score can depend on besides its weights (architecture, tokenizer, chat template);
# meta.json is a record of how the checkpoint was made, read by nothing that samples.
_CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)
_CODE_ROOTS = ("adapters/tiny", "families")
_LIBRARIES = ("torch", "transformers", "tokenizers", "jinja2", "safetensors", "numpy")
_REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _code_fingerprint() -> str:
    """The sampling and scoring code and libraries: every module of ``adapters.tiny`` and ``families``, and the
    versions of the libraries a sampled token goes through (a kernel, tokenizer or template change can move it)."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    for dist in _LIBRARIES:
        try:
            h.update(f"{dist}={version(dist)};".encode())
        except PackageNotFoundError:
            h.update(f"{dist}=absent;".encode())
    for root in _CODE_ROOTS:
        for path in sorted((_REPO / root).rglob("*.py")):
            h.update(str(path.relative_to(_REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _checkpoint_digest(model: Module, directory: Path) -> str:
    """The model's every tensor (name, dtype, shape, bytes), and the files of ``directory`` it was loaded with."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode() + b"\0")
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    for file in _CHECKPOINT_FILES:
        path = directory / file
        data = path.read_bytes() if path.exists() else b"<absent>"
        h.update(file.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def memo_key(
    ckpt: Checkpoint,
    *,
    split: Literal["hidden", "dev"],
    family: str,
    temperature: float,
    seed: int,
    limit: int | None,
) -> str:
    """The hex digest naming one score of :func:`~adapters.tiny.scorer.score_hidden` (or ``score_dev``) of the
    loaded ``ckpt`` (its weights as they are in memory, trained or not, and its directory's other files) at the
    scorer's own ``top_p`` and ``max_tokens``: every input the score is a function of (see the module
    docstring), the current eval key's fingerprint included (it draws the hidden and dev tasks)."""
    from families import DEV_EVAL_SIZE, HIDDEN_SIZE, current_key

    from .scorer import DEFAULT_MAX_TOKENS

    # The tasks scored, not the limit asked for: the first `limit` of the split (as the scorer slices it), so
    # "no limit" and a limit at or past the split's size (a task spec's eval.size of 200) are one key.
    if split == "hidden":
        tasks = len(range(HIDDEN_SIZE)[:limit])
    else:
        tasks = DEV_EVAL_SIZE if limit is None else max(0, min(limit, DEV_EVAL_SIZE))
    if ckpt.path is None:
        raise ValueError(f"checkpoint {ckpt.name!r} was not loaded from a directory: its files are unknown")
    parts = {
        "checkpoint": _checkpoint_digest(ckpt.model, ckpt.path),
        "split": split,
        "family": family,
        "eval_key": current_key().fingerprint,
        "temperature": temperature,
        "top_p": 1.0,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "seed": seed,
        "tasks": tasks,
        "code": _code_fingerprint(),
    }
    return hashlib.sha256(msgspec.json.encode(parts, order="sorted")).hexdigest()


class ScoreMemo:
    """A directory of scores by :func:`memo_key`; ``ScoreMemo(None)`` keeps nothing (every ``get`` misses)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    @classmethod
    def at(cls, where: str) -> ScoreMemo:
        """The memo in directory ``where``, or an off one for ``off`` (also ``0``, ``none``)."""
        return cls(None if where.strip().lower() in _OFF else Path(where).expanduser())

    @classmethod
    def from_env(cls) -> ScoreMemo:
        """The memo this machine's user has (module docstring), or an off one."""
        configured = os.environ.get(MEMO_ENV)
        if configured is not None:
            return cls.at(configured)
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return cls(Path(cache) / "ait" / "scores")

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> ScoreReport | None:
        if self.root is None:
            return None
        from .scorer import ScoreReport  # torch and the scorer: only for a memo that is on

        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("score_memo.unreadable", path=str(path), error=str(exc))
            return None
        try:
            return msgspec.json.decode(data, type=ScoreReport)
        except msgspec.DecodeError as exc:
            log.warning("score_memo.bad_entry", path=str(path), error=str(exc))
            return None

    def put(self, key: str, report: ScoreReport) -> None:
        """Keep ``report`` under ``key``; a memo that cannot be written is logged, never fatal (it only saves time)."""
        if self.root is None:
            return
        try:
            write_atomic(self._path(key), msgspec.json.encode(report))
        except OSError as exc:
            log.warning("score_memo.not_written", path=str(self._path(key)), error=str(exc))
