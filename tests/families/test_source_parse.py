"""``parse_source`` never lets two threads into the parser at once (CPython 3.11 corrupts the parser's recursion
counter otherwise: ``SystemError: AST constructor recursion depth mismatch``, seen in this suite)."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from families import source_parse
from families.source_parse import parse_source


def test_parses_like_ast_parse() -> None:
    source = "def f(x):\n    return [i * x for i in range(3)]\n"
    assert ast.dump(parse_source(source, "m.py")) == ast.dump(ast.parse(source, filename="m.py"))


def test_threads_parse_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    inside = 0
    most = 0
    guard = threading.Lock()
    real_parse = ast.parse

    def slow_parse(*args: Any, **kwargs: Any) -> Any:
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)  # a long parse: without the lock the other threads would enter meanwhile
        with guard:
            inside -= 1
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(source_parse.ast, "parse", slow_parse)
    start = threading.Barrier(4)

    def parse(_: int) -> int:
        start.wait()
        return len(parse_source("x = 1\n", "m.py").body)

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(parse, range(4))) == [1] * 4
    assert most == 1
