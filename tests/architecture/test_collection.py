"""Collecting the test suite loads none of the heavy stacks (issue 18).

torch, transformers, verifiers, matplotlib and the Tinker SDK take seconds to import; a test module that
imports one at module level (directly, through an ``adapters.tiny.*`` submodule, a ``adapters.cpu_trainer``
name, ``views.report.plots``...) makes every run pay for it, even one that selects a single unrelated test.
They load inside the fixtures and tests that use them. This runs ``pytest --collect-only`` over ``tests`` in a
child process with a small plugin that records which of them are in ``sys.modules``, and which collector
brought each one in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SUITE_COLLECTION_MODULES

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "verifiers", "matplotlib", "tinker")
MARK = "HEAVY-LOADED "

# Run as ``python -c WATCH <heavy,names> <pytest args...>``; prints MARK + {module: first collector} at the end.
WATCH = f"""
import json, sys
import pytest

HEAVY = sys.argv[1].split(",")


class Watch:
    def __init__(self):
        self.first = {{m: "(before collection)" for m in HEAVY if m in sys.modules}}

    def pytest_collectreport(self, report):
        for m in HEAVY:
            if m in sys.modules and m not in self.first:
                self.first[m] = report.nodeid or "(root)"

    def pytest_collection_finish(self, session):
        self.pytest_collectreport(type("R", (), {{"nodeid": "(end of collection)"}}))
        print({MARK!r} + json.dumps(self.first), flush=True)


sys.exit(pytest.main(sys.argv[2:], plugins=[Watch()]))
"""


def collect(heavy: tuple[str, ...], *args: str, cwd: Path = ROOT) -> dict[str, str]:
    """Collect with the watch plugin; the heavy modules loaded, each with the collector that loaded it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    cmd = [sys.executable, "-c", WATCH, ",".join(heavy), "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"]
    proc = subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith(MARK)]
    loaded: dict[str, str] = json.loads(line.removeprefix(MARK))
    return loaded


def test_the_watch_sees_a_module_imported_at_collection(tmp_path: Path) -> None:
    """The negative case first: a test module that imports a watched module at module level is caught and named
    (with a light stand-in for the heavy stacks, so this check stays fast)."""
    # One collection (each costs a Python start-up): the module that imports inside its test is collected first
    # and not blamed; the one that imports at module level is.
    (tmp_path / "test_a_light.py").write_text("def test_nothing():\n    import colorsys\n")
    (tmp_path / "test_b_eager.py").write_text("import colorsys\n\n\ndef test_nothing():\n    pass\n")
    loaded = collect(("colorsys",), str(tmp_path), "--rootdir", str(tmp_path), cwd=tmp_path)
    assert loaded == {"colorsys": "test_b_eager.py"}


def test_collecting_the_suite_imports_no_heavy_stack(pytestconfig: pytest.Config) -> None:
    # A session that collected the whole suite itself (CI's) already shows what collecting it loads: the child
    # collection (a Python start-up plus the whole suite again) runs only when this one did not, or to name the
    # collector that loaded a heavy stack.
    seen = pytestconfig.stash.get(SUITE_COLLECTION_MODULES, None)
    if seen is not None and not seen & set(HEAVY):
        return
    loaded = collect(HEAVY, "tests")
    assert loaded == {}, f"imported at collection (module: first collector that loaded it): {loaded}"
