"""The project's import graph, read from the source with ``ast`` (no module is imported to build it).

Every ``import`` and ``from ... import`` counts, at module level or inside a function: a lazy import is still a
dependency, so it is held to the same layer contract as a top-level one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import msgspec

__all__ = ["PACKAGES", "ROOT", "Edge", "cycles", "edges", "module_graph", "module_name"]

ROOT = Path(__file__).resolve().parents[2]

#: the product's top-level packages (what the wheel ships)
PACKAGES = ("events", "engine", "families", "handlers", "adapters", "views", "cli")


class Edge(msgspec.Struct, frozen=True):
    importer: str  # dotted module that imports
    imported: str  # dotted module (or module.attribute) it names
    path: str  # file, relative to the repository root
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def edges(top: str) -> Iterator[Edge]:
    """Every import in the ``top`` folder that names one of the product packages."""
    for path in sorted((ROOT / top).rglob("*.py")):
        if ".venv" in path.parts:
            continue
        importer = module_name(path)
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = _resolve(importer, path.name == "__init__.py", node)
                # `from pkg import name` may name a submodule: record both spellings, the checks use the longer
                targets = [f"{mod}.{a.name}" for a in node.names if a.name != "*"] or [mod]
            for target in targets:
                if target.split(".")[0] in PACKAGES:
                    yield Edge(importer, target, rel, node.lineno)


def module_graph(found: list[Edge]) -> dict[str, set[str]]:
    """Importer -> the modules it imports (``from pkg import name`` resolved to ``pkg.name`` when that is a module)."""
    modules = {module_name(p) for top in PACKAGES for p in (ROOT / top).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for e in found:
        target = e.imported
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != e.importer:
            graph.setdefault(e.importer, set()).add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)
