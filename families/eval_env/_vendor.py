"""Copying a family's source into a generated package, so the package runs without this project.

A family module and everything it imports *relatively* from the ``families`` package (found by
walking the import statements with ``ast``, transitively) are copied under ``<package>/_family/``
with the same relative layout. ``families/__init__.py`` is not copied (it imports every family);
a one-line stub stands in. Anything the copy cannot carry is an error that names the file and line:
an absolute ``import families...``, a relative import reaching above the package, a ``from . import
name`` of something that is not a module, or a third-party import that is not a declared dependency.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec

from families.source_parse import parse_source

__all__ = ["THIRD_PARTY", "VendorError", "VendoredFamily", "vendor_family"]

# Third-party modules a family may import, and the requirement each adds to the generated package.
THIRD_PARTY: dict[str, str] = {"msgspec": "msgspec>=0.19"}

_PACKAGE = "families"
_STUB_INIT = '"""Vendored copy of the family source this package was generated from."""\n'


class VendorError(ValueError):
    """The family source cannot be copied into a self-contained package."""


class VendoredFamily(msgspec.Struct, frozen=True, kw_only=True):
    files: dict[str, str]  # path relative to the package root ("_family/calc_chain.py") -> source
    module: str  # the family module, relative to the package root ("_family.calc_chain")
    class_name: str
    requirements: list[str]


def _package_root() -> Path:
    return Path(importlib.import_module(_PACKAGE).__file__ or "").parent


def _module_file(root: Path, dotted: str) -> Path | None:
    """The source file of ``families.<dotted>`` (a module file or a subpackage's __init__)."""
    rel = Path(*dotted.split("."))
    for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _relative_targets(path: Path, root: Path, tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(dotted module name under ``families``, line) for every import that must be copied along."""
    rel = path.relative_to(root)
    # The package a relative import resolves against (for an __init__, the package it defines).
    package_parts = list(rel.parent.parts)
    where = f"{_PACKAGE}/{rel}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == _PACKAGE:
                    raise VendorError(
                        f"{where}:{node.lineno}: absolute import of {alias.name!r}; use a relative import"
                    )
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if (node.module or "").split(".")[0] == _PACKAGE:
                    raise VendorError(
                        f"{where}:{node.lineno}: absolute import from {node.module!r}; use a relative import"
                    )
                continue
            up = node.level - 1
            if up > len(package_parts):
                raise VendorError(f"{where}:{node.lineno}: relative import reaches above the {_PACKAGE} package")
            base = package_parts[: len(package_parts) - up]
            if node.module:
                dotted = ".".join([*base, node.module])
                if dotted:
                    yield dotted, node.lineno
                # ``from .pkg import mod`` may name submodules too.
                for alias in node.names:
                    yield f"{dotted}.{alias.name}?", node.lineno
            else:
                for alias in node.names:
                    yield ".".join([*base, alias.name]), node.lineno


def _third_party(path: Path, root: Path, tree: ast.Module) -> Iterator[str]:
    where = f"{_PACKAGE}/{path.relative_to(root)}"
    for node in ast.walk(tree):
        names: list[tuple[str, int]] = []
        if isinstance(node, ast.Import):
            names = [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [(node.module, node.lineno)]
        for name, line in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ("__future__", _PACKAGE):
                continue  # (an absolute import of the package itself is reported by _relative_targets)
            if top not in THIRD_PARTY:
                raise VendorError(
                    f"{where}:{line}: imports {top!r}, which a generated eval package does not carry; "
                    f"allowed third-party modules: {', '.join(sorted(THIRD_PARTY))}"
                )
            yield THIRD_PARTY[top]


def vendor_family(module_name: str, class_name: str, root: Path | None = None) -> VendoredFamily:
    """The sources to copy for the family class ``class_name`` defined in ``families.<module_name>``.

    ``root`` is the directory of the ``families`` package (default: the imported one).
    """
    root = root if root is not None else _package_root()
    start = module_name.removeprefix(f"{_PACKAGE}.")
    if _module_file(root, start) is None:
        raise VendorError(f"no source for {_PACKAGE}.{start} under {root}")
    files: dict[str, str] = {"_family/__init__.py": _STUB_INIT}
    requirements: set[str] = set()
    pending = [(start, f"{_PACKAGE}.{start}", 0)]
    seen: set[str] = set()
    while pending:
        dotted, origin, line = pending.pop()
        optional = dotted.endswith("?")
        dotted = dotted.rstrip("?")
        if dotted in seen:
            continue
        path = _module_file(root, dotted)
        if path is None:
            if optional:
                continue  # ``from .x import name``: a plain name, not a submodule
            raise VendorError(f"{origin}:{line}: imports {_PACKAGE}.{dotted}, which is not a module file")
        seen.add(dotted)
        rel = path.relative_to(root)
        if rel == Path("__init__.py"):
            raise VendorError(f"{origin}:{line}: imports from the {_PACKAGE} package itself; import the module")
        source = path.read_text()
        tree = parse_source(source, str(path))
        files[f"_family/{rel.as_posix()}"] = source
        requirements.update(_third_party(path, root, tree))
        # Every package between the root and this module needs its __init__ as well.
        for parent in rel.parents:
            if parent != Path(".") and _dotted(parent) not in seen:
                pending.append((_dotted(parent), f"{_PACKAGE}.{dotted}", 0))
        for target, lineno in _relative_targets(path, root, tree):
            pending.append((target, f"{_PACKAGE}/{rel}", lineno))
    module = f"_family.{start}"
    return VendoredFamily(files=files, module=module, class_name=class_name, requirements=sorted(requirements))


def _dotted(rel_dir: Path) -> str:
    return ".".join(rel_dir.parts)
