"""The CPU trainer's per-process pre-score cache (a warm pod scores each base model once per family and hidden
set) and the task spec's eval size as the hidden-set cap (the CPU replica's specs ask for a small one)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")

ROOT = Path(__file__).resolve().parents[3]


async def test_the_pre_score_is_computed_once_per_model_family_and_hidden_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.cpu_trainer import CpuTrainer

    calls: list[tuple[Any, ...]] = []

    async def fake_score(self: Any, ckpt: Any, family: str, temperature: float, limit: int | None, **_: Any) -> Any:
        calls.append((ckpt.path, family, temperature, limit))
        return SimpleNamespace(score=0.25 * len(calls))

    monkeypatch.setattr(CpuTrainer, "_score", fake_score)
    trainer = CpuTrainer()
    small, large = SimpleNamespace(path=Path("tiny-0.6b")), SimpleNamespace(path=Path("tiny-1.7b"))
    first = await trainer._pre_score(small, "calc_chain", 1.0, 64)
    assert (await trainer._pre_score(small, "calc_chain", 1.0, 64)) is first and len(calls) == 1
    # Another model, family or hidden-set size is another score.
    await trainer._pre_score(large, "calc_chain", 1.0, 64)
    await trainer._pre_score(small, "ledger", 1.0, 64)
    await trainer._pre_score(small, "calc_chain", 1.0, None)
    assert len(calls) == 4
    # A new trainer (a new pod) scores again.
    await CpuTrainer()._pre_score(small, "calc_chain", 1.0, 64)
    assert len(calls) == 5


def test_the_spec_eval_size_caps_the_hidden_set(tmp_path: Path) -> None:
    from adapters.cpu_trainer._trainer import _spec_limits

    assert _spec_limits(tmp_path) == (None, None, None)
    shutil.copy(ROOT / "examples" / "replica" / "tasks" / "calc_chain_v1_fast.json", tmp_path / "task_spec.json")
    assert _spec_limits(tmp_path) == (600.0, 1.0, 64)
    shutil.copy(ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json", tmp_path / "task_spec.json")
    assert _spec_limits(tmp_path)[2] == 200
