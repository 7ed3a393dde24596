"""The task spec's eval size as the CPU trainer's hidden-set cap (the CPU replica's specs ask for a small one).
The pre-score cache is tested on real jobs in test_trainer.py."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")

ROOT = Path(__file__).resolve().parents[3]


def test_the_spec_eval_size_caps_the_hidden_set(tmp_path: Path) -> None:
    from adapters.cpu_trainer._trainer import _spec_limits

    assert _spec_limits(tmp_path) == (None, None, None)
    shutil.copy(ROOT / "examples" / "replica" / "tasks" / "calc_chain_v1_fast.json", tmp_path / "task_spec.json")
    assert _spec_limits(tmp_path) == (600.0, 1.0, 64)
    shutil.copy(ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json", tmp_path / "task_spec.json")
    assert _spec_limits(tmp_path)[2] == 200
