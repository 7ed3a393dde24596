"""Session-wide test setup: the hidden eval sets are built under the committed PUBLIC test key.

Hidden sets derive from the installation key (``families._key``); pinned hidden-set digests and fixtures need
the same key on every machine, so the whole suite (and every subprocess that inherits the environment) uses
``tests/data/eval-test.key``, never the developer's real key at ``~/.config/ait/eval.key``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI shares 2 cores between test processes: input generation and examples may be slow there without being wrong.
# Per-test settings (example counts) still apply; only the timing checks are off.
settings.register_profile("shared-cores", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-cores")

TEST_KEY_FILE = Path(__file__).parent / "data" / "eval-test.key"

# Set at import, before any test module imports ``families``, so no hidden set is ever built under another key.
os.environ["AIT_EVAL_KEY_FILE"] = str(TEST_KEY_FILE)


@pytest.fixture(autouse=True)
def _baselines_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Frozen baselines default to ~/.config/ait/baselines: a test must never read or write the developer's.
    monkeypatch.setenv("AIT_BASELINES_DIR", str(tmp_path_factory.mktemp("baselines")))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long", action="store_true", help="fuzz modules: many more examples (same as AIT_FUZZ_LONG=1)"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fuzz-long"):
        os.environ["AIT_FUZZ_LONG"] = "1"  # read when the fuzz modules build their hypothesis settings


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    report = os.environ.get("AIT_FUZZ_REPORT")
    if report:
        from tests.fuzzing import write_report

        write_report(Path(report))
