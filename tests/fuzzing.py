"""What the fuzz modules share: example budgets (short in CI, long by hand) and a tally of outcomes per surface.

Each fuzz test throws generated or mutated input at one surface and sorts every outcome:

- ``clean_error``: refused with a clear one-line error of the expected kind (naming the file, line, field...);
- ``accepted``: the input was valid and was taken (the oracle agrees it is valid);
- ``traceback``: an unexpected exception escaped (a test fails on the first);
- ``http_500``: the pod agent answered 5xx (a test fails on the first);
- ``silent_accept``: wrong input taken without complaint (a test fails on the first).

Long runs: ``pytest --fuzz-long`` or ``AIT_FUZZ_LONG=1`` multiplies every budget (docs/fuzzing.md); with
``AIT_FUZZ_REPORT=<file.json>`` the session writes the tally there at its end.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

__all__ = [
    "OUTCOMES",
    "TALLY",
    "add_rows",
    "fuzz_long",
    "fuzz_settings",
    "record",
    "tally_rows",
    "untallied",
    "write_report",
]

OUTCOMES = ("clean_error", "accepted", "traceback", "http_500", "silent_accept")
TALLY: defaultdict[str, Counter[str]] = defaultdict(Counter)


def fuzz_long() -> bool:
    return os.environ.get("AIT_FUZZ_LONG", "") not in ("", "0")


def fuzz_settings(ci: int, long: int, **extra: Any) -> settings:
    """Hypothesis settings: ``ci`` examples, derandomized (a CI run is repeatable), or ``long`` random ones."""
    if fuzz_long():
        return settings(
            max_examples=long,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            **extra,
        )
    return settings(
        max_examples=ci,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
        **extra,
    )


def record(surface: str, outcome: str, detail: str = "") -> None:
    """Count one input of ``surface``; ``detail`` (e.g. "torn", "corrupt") breaks the outcome down."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown fuzz outcome {outcome!r}")
    TALLY[surface]["tried"] += 1
    TALLY[surface][outcome] += 1
    if detail:
        TALLY[surface][f"{outcome}.{detail}"] += 1


@contextlib.contextmanager
def untallied() -> Iterator[None]:
    """For the oracles' own negative tests: what they record inside is not counted."""
    saved = {k: Counter(v) for k, v in TALLY.items()}
    try:
        yield
    finally:
        TALLY.clear()
        TALLY.update(saved)


def tally_rows() -> dict[str, dict[str, int]]:
    """The tally as plain rows, one per surface: what the report holds and what an xdist worker sends."""
    return {
        s: {
            "tried": c["tried"],
            **{k: c[k] for k in OUTCOMES},
            **dict(sorted((k, v) for k, v in c.items() if "." in k)),
        }
        for s, c in sorted(TALLY.items())
    }


def add_rows(rows: dict[str, dict[str, int]]) -> None:
    """Add another process's rows (an xdist worker's) to this process's tally."""
    for surface, counts in rows.items():
        TALLY[surface].update(counts)


def write_report(path: Path) -> None:
    path.write_text(json.dumps(tally_rows(), indent=2) + "\n")
