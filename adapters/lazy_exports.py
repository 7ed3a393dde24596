"""Lazy package exports: a package's public names, imported from their submodule on first use.

A package ``__init__`` that imports every submodule makes importing one light piece (a chat format, a sandbox
limit) pay for torch, transformers or verifiers: seconds on a busy machine, in the pod agent, the CLI and every
test worker's collection. Such a package lists its names in ``TYPE_CHECKING`` imports (so type checkers see
them) and sets ``__getattr__ = lazy_exports(__name__, {name: submodule})`` (PEP 562) for run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``package.<where[name]>`` and returns its ``name``."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{module}"), name)

    return __getattr__
