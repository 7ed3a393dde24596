"""Session-wide test setup: the hidden eval sets are built under the committed PUBLIC test key.

Hidden sets derive from the installation key (``families._key``); pinned hidden-set digests and fixtures need
the same key on every machine, so the whole suite (and every subprocess that inherits the environment) uses
``tests/data/eval-test.key``, never the developer's real key at ``~/.config/ait/eval.key``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TEST_KEY_FILE = Path(__file__).parent / "data" / "eval-test.key"

# Set at import, before any test module imports ``families``, so no hidden set is ever built under another key.
os.environ["AIT_EVAL_KEY_FILE"] = str(TEST_KEY_FILE)


@pytest.fixture(autouse=True)
def _baselines_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Frozen baselines default to ~/.config/ait/baselines: a test must never read or write the developer's.
    monkeypatch.setenv("AIT_BASELINES_DIR", str(tmp_path_factory.mktemp("baselines")))
