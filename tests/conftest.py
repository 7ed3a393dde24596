"""Session-wide test setup: the hidden eval sets are built under the committed PUBLIC test key.

Hidden sets derive from the installation key (``families._key``); pinned hidden-set digests and fixtures need
the same key on every machine, so the whole suite (and every subprocess that inherits the environment) uses
``tests/data/eval-test.key``, never the developer's real key at ``~/.config/ait/eval.key``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, settings

# CI shares 2 cores between test processes: input generation and examples may be slow there without being wrong.
# Per-test settings (example counts) still apply; only the timing checks are off.
settings.register_profile("shared-cores", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-cores")

TEST_KEY_FILE = Path(__file__).parent / "data" / "eval-test.key"

# Set at import, before any test module imports ``families``, so no hidden set is ever built under another key.
os.environ["AIT_EVAL_KEY_FILE"] = str(TEST_KEY_FILE)

# One OpenMP thread per test process (inherited by every pod, trainer and `ait` subprocess a test starts), set
# before anything loads torch. The suite runs a worker more than there are cores, each often with a torch child:
# torch's default of one thread per core oversubscribed the CPUs, and its idle OpenMP threads spin. On the tiny
# models a second thread buys nothing: tests/adapters/tiny/test_scorer.py took 84 CPU-s with torch's default and
# 75 with one thread, alone on 2 idle cores. Code that sets its own count (a job's `threads`) still does.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _baselines_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Frozen baselines default to ~/.config/ait/baselines: a test must never read or write the developer's.
    monkeypatch.setenv("AIT_BASELINES_DIR", str(tmp_path_factory.mktemp("baselines")))
    # Base-model scores are memoised in ~/.cache/ait/scores (adapters.tiny.score_memo): each test starts with an
    # empty memo of its own, so no test is served a score another test (or the developer) took.
    monkeypatch.setenv("AIT_SCORE_MEMO_DIR", str(tmp_path_factory.mktemp("score-memo")))


@pytest.fixture(autouse=True)
def _structlog_config() -> Iterator[None]:
    # structlog's config is process-wide: a test (or code it calls) that configures it, e.g. to filter out
    # warnings, must not change what later tests on the same worker see (capture_logs misses filtered events).
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long", action="store_true", help="fuzz modules: many more examples (same as AIT_FUZZ_LONG=1)"
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fuzz-long"):
        os.environ["AIT_FUZZ_LONG"] = "1"  # read when the fuzz modules build their hypothesis settings


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores (at most 4, ``--maxprocesses``). Much of the suite waits on
    child processes (sandboxes, pods, vf-eval, servers), so on 2 cores two workers left a third of the CPU idle;
    a third worker fills it."""
    return (os.cpu_count() or 1) + 1


def _declared_cost(item: pytest.Item) -> float:
    """A test's declared worst case: its ``timeout`` mark if it is marked slow, else 0."""
    if item.get_closest_marker("slow") is None:
        return 0.0
    timeout = item.get_closest_marker("timeout")
    return float(timeout.args[0]) if timeout is not None and timeout.args else 300.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Longest first: pytest-xdist (--dist loadfile --no-loadscope-reorder) hands out files in collection order, so
    # a two-minute file collected last runs alone at the end while the other workers idle. (Without the flag xdist
    # reorders files by test count, most first, and a one-test two-minute file ran last.) Files holding slow tests
    # go first, the longest declared first; the many short files then fill in around them. Stable: ties keep their
    # order.
    cost: dict[str, float] = {}
    for item in items:
        cost[item.path.as_posix()] = max(cost.get(item.path.as_posix(), 0.0), _declared_cost(item))
    items.sort(key=lambda item: -cost[item.path.as_posix()])
    _check_shared_fixture_groups(items, config.rootpath)
    _unique_node_ids(items)


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """Every test's node id is its own. schemathesis's ``@schema.parametrize()`` names its items
    ``test[GET /health]``, ... but gives them all the function's node id; pytest-xdist keys tests by node id, so
    under ``-n`` seven of the pod API's eight operations were never fuzzed and the run still read "passed". The
    item's name (with its operation) becomes its id, and any other collision stops the run."""
    for item in items:
        if "[" in item.name and item.name.endswith("]") and not item.nodeid.endswith("]"):
            # pytest 9 keeps a node's id as a structured NodeId; the parameters are its ``params``.
            item._id = item.id.with_params(item.name[item.name.index("[") + 1 : -1])  # type: ignore[attr-defined]
    seen: set[str] = set()
    clashes = sorted({item.nodeid for item in items if item.nodeid in seen or seen.add(item.nodeid)})
    if clashes:
        raise pytest.UsageError(f"tests sharing a node id (pytest-xdist would run only one of each): {clashes[:5]}")


# Files that share an expensive session-scoped fixture run on one xdist worker: a session fixture is built once per
# worker that needs it, and ``--dist loadfile`` alone spread these files over up to three workers, each building
# the whole fixture again (``probe_runs``: every sandboxed scenario on both probe paths, ~50 s per build on 2 cores).
SHARED_SESSION_FIXTURES: dict[str, tuple[str, ...]] = {
    "probe_runs": (
        "tests/adapters/probe/test_validator.py",
        "tests/adapters/probe/test_hostile.py",
    ),
}
_SCOPE_OF_FILE = {path: f"[{name}]" for name, paths in SHARED_SESSION_FIXTURES.items() for path in paths}


def _check_shared_fixture_groups(items: list[pytest.Item], root: Path) -> None:
    """A file that starts using a listed fixture without joining its group would silently build it again."""
    for item in items:
        rel = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else item.path.as_posix()
        for name, paths in SHARED_SESSION_FIXTURES.items():
            if name in getattr(item, "fixturenames", ()) and rel not in paths:
                raise pytest.UsageError(f"{rel} uses the session fixture {name}: add it to SHARED_SESSION_FIXTURES")


# tryfirst: xdist's own implementation (registered after this conftest, so called before it) returns the plain one.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        """``loadfile``, except that the files of one SHARED_SESSION_FIXTURES entry form one work unit."""

        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return _SCOPE_OF_FILE.get(path, path)

    return SharedFixtureScheduling(config, log)  # type: ignore[arg-type]


# The modules loaded when this session finished collecting, if it collected the whole suite (tests/architecture/
# test_collection.py then reads this instead of collecting the whole suite again in a child process).
SUITE_COLLECTION_MODULES = pytest.StashKey[frozenset[str]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    here = config.invocation_params.dir
    whole = [(here / str(a).split("::")[0]).resolve() for a in config.args] == [config.rootpath / "tests"]
    narrowed = any(config.getoption(o, default=None) for o in ("lf", "ignore", "ignore_glob"))
    if whole and not narrowed:
        config.stash[SUITE_COLLECTION_MODULES] = frozenset(sys.modules)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from tests.fuzzing import tally_rows, write_report

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        # An xdist worker counted only its own tests: it hands its tally to the controller, which writes the
        # report once every worker is down (each worker writing the file itself left the controller's empty one).
        workeroutput["fuzz_tally"] = tally_rows()
        return
    report = os.environ.get("AIT_FUZZ_REPORT")
    if report:
        write_report(Path(report))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist, on the controller: add a finished worker's fuzz tally to the session's."""
    from tests.fuzzing import add_rows

    add_rows(getattr(node, "workeroutput", {}).get("fuzz_tally", {}))
