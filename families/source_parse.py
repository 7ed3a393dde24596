"""``parse_source``: :func:`ast.parse` behind one process-wide lock.

CPython 3.11's parser keeps a recursion-depth counter that two threads parsing at once can corrupt: the loser
fails with ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905, fixed in 3.12
only). The controller parses Python source on more than one thread: a hidden eval package is vendored on a
worker thread (one per family, pods asking at once) while the probe's static scan runs on the event loop.
Every such parse goes through here. It lives in ``families`` because that is the lowest layer both users
(``families.eval_env`` and ``adapters.probe``) may import.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse_source"]

_LOCK = threading.Lock()


def parse_source(source: str | bytes, filename: str) -> ast.Module:
    """``ast.parse(source, filename)``, one parse at a time in this process."""
    with _LOCK:
        return ast.parse(source, filename=filename)
