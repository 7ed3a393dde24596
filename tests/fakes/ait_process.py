"""``ait`` as its own process, for tests that must kill a run (``kill -9`` at an event boundary) and resume it.

The kill point travels in :data:`cli.crash_hook.KILL_ENV`; any value inherited from the caller's environment is
dropped, so only a run that asks for a kill gets one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli.crash_hook import KILL_ENV

__all__ = ["ROOT", "run_ait"]

ROOT = Path(__file__).resolve().parents[2]


def run_ait(
    runs: Path,
    *args: str,
    kill_after: int | None = None,
    threads: int | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m cli --runs-root RUNS ARGS...`` from the repository root; SIGKILLed right after event
    ``kill_after`` when given. ``threads`` pins ``OMP_NUM_THREADS`` (the same torch kernels in every run, however
    many cores the machine has: bit-identical results across runs need it)."""
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if kill_after is not None:
        env[KILL_ENV] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-m", "cli", "--runs-root", str(runs), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
