"""The layer contract and the private-module rule, checked on the source (docs/architecture.md, "The layers").

    events  <-  engine  <-  families  <-  handlers  <-  adapters | views  <-  cli

A package may import only the packages below it (``adapters`` and ``views`` are siblings: neither imports the
other); only ``cli`` wires concrete adapters in. And no module imports another package's ``_private`` module:
``a.b._c`` may be imported from inside ``a.b`` (and from its tests, ``tests/a/b/``) and from nowhere else.
"""

from __future__ import annotations

import pytest

from tests.architecture.imports import PACKAGES, ROOT, Edge, cycles, edges, module_graph

ALLOWED: dict[str, set[str]] = {
    "events": {"events"},
    "engine": {"events", "engine"},
    "families": {"events", "families"},
    "handlers": {"events", "engine", "families", "handlers"},
    "adapters": {"events", "engine", "families", "handlers", "adapters"},
    "views": {"events", "engine", "families", "handlers", "views"},
    "cli": set(PACKAGES),
}


def layer_violations(found: list[Edge]) -> list[str]:
    bad = []
    for e in found:
        src, dst = e.importer.split(".")[0], e.imported.split(".")[0]
        if src in ALLOWED and dst not in ALLOWED[src]:
            bad.append(f"{e.path}:{e.line}: {src} may not import {dst} ({e.imported})")
    return bad


def private_violations(found: list[Edge]) -> list[str]:
    bad = []
    for e in found:
        parts = e.imported.split(".")
        for i, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                owner = ".".join(parts[:i])  # the package the private module belongs to
                home = e.importer.removeprefix("tests.")  # a test module is at home in the package it mirrors
                if not (e.importer == owner or e.importer.startswith(owner + ".") or home.startswith(owner + ".")):
                    bad.append(f"{e.path}:{e.line}: {e.importer} imports {owner}'s private {'.'.join(parts[: i + 1])}")
                break
    return bad


@pytest.fixture(scope="module")
def product_edges() -> list[Edge]:
    found = [e for top in PACKAGES for e in edges(top)]
    assert len(found) > 500, "the import scan found too little: is ROOT right?"
    return found


def test_every_package_imports_only_the_layers_below_it(product_edges: list[Edge]) -> None:
    assert layer_violations(product_edges) == []


def test_no_module_imports_another_packages_private_module(product_edges: list[Edge]) -> None:
    test_edges = [e for e in edges("tests") if not e.path.startswith("tests/architecture/")]
    found = private_violations(product_edges + test_edges)
    # TEMPORARY (issue 15 lands the public sandbox package): the CPU trainer's use of the probe's sandbox.
    pending = ("adapters/cpu_trainer/", "tests/integrity/", "tests/adapters/cpu_trainer/")
    assert [v for v in found if not v.startswith(pending)] == []


def test_no_import_cycles(product_edges: list[Edge]) -> None:
    """Lazy imports included: a cycle hidden inside a function is still two modules that need each other."""
    assert cycles(module_graph(product_edges)) == []


def test_the_checks_catch_a_violation() -> None:
    """Each rule fails on a made-up edge of the kind it forbids (so a clean result above means something)."""
    up = Edge("handlers.fleet.dispatcher", "cli.worker_wiring", "handlers/fleet/dispatcher.py", 1)
    sideways = Edge("adapters.wandb_sink", "views.report", "adapters/wandb_sink.py", 1)
    private = Edge("adapters.cpu_trainer.confine", "adapters.probe._bwrap", "adapters/cpu_trainer/confine.py", 1)
    own = Edge("adapters.probe._validator", "adapters.probe._bwrap", "adapters/probe/_validator.py", 1)
    mirrored = Edge("tests.adapters.probe.test_x", "adapters.probe._bwrap", "tests/adapters/probe/test_x.py", 1)
    assert len(layer_violations([up, sideways])) == 2
    assert len(private_violations([private, own, mirrored])) == 1
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert (ROOT / "handlers" / "fleet" / "dispatcher.py").exists()
