"""Shared fixtures: one local learner on the tiny-0.6b fixture (loaded once per module: torch and peft are
imported here, inside fixtures, never at test collection)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BASE = "tiny-0.6b"
RANK = 4


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine's cores are shared; one thread is also deterministic
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("local_run")


def make_learner(root: Path, **kw: Any) -> Any:
    from adapters.local_learner.learner import LocalLearner

    return LocalLearner(root, base_model=BASE, rank=RANK, seed=0, device="cpu", **kw)


@pytest.fixture(scope="module")
def learner(run_dir: Path) -> Any:
    return make_learner(run_dir)
