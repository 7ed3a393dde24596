"""Stand-ins for a GPU pod's trainer stack, for the pod self-check and start-command tests.

:func:`make_stack` lays out a bootstrap root the way the pinned bootstrap leaves it (``prime-rl`` checked out,
its venv, the scoring venv, the bootstrap's marker), with stand-in executables instead of the real ones: a
``nvidia-smi`` that lists GPUs, a prime-rl venv ``python`` that answers the self-check's import probe with a
vLLM version (or an import error), and a ``vf-eval``. Each piece can be left out or made wrong, so a test can
show that the self-check names exactly what is missing.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from adapters.prime_rl import pins
from adapters.prime_rl.bootstrap import BootstrapPaths, pins_fingerprint

__all__ = ["make_stack", "write_exe"]


def write_exe(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def make_stack(
    root: Path,
    *,
    gpus: int = 1,
    commit: str = pins.PRIME_RL_COMMIT,
    vllm: str = pins.VLLM_VERSION,
    import_error: str = "",
    scoring: bool = True,
    marker: bool = True,
) -> str:
    """Lay out a stand-in stack under ``root``; returns a ``PATH`` whose ``nvidia-smi`` lists ``gpus`` GPUs
    (``gpus < 0``: no ``nvidia-smi`` at all)."""
    paths = BootstrapPaths(str(root))
    root.mkdir(parents=True, exist_ok=True)
    bin_dir = root / "standin-bin"
    bin_dir.mkdir(exist_ok=True)
    if gpus >= 0:
        lines = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d})\\n" for i in range(gpus))
        write_exe(bin_dir / "nvidia-smi", f"printf '{lines}'")
    prime_rl = Path(paths.prime_rl)
    (prime_rl / ".git").mkdir(parents=True, exist_ok=True)
    (prime_rl / ".git" / "HEAD").write_text(commit + "\n")  # a detached checkout names its commit
    if import_error:
        write_exe(
            prime_rl / ".venv" / "bin" / "python",
            f"echo 'Traceback ...' >&2; echo {shlex.quote(import_error)} >&2; exit 1",
        )
    else:
        write_exe(prime_rl / ".venv" / "bin" / "python", f"echo {vllm}")
    if scoring:
        write_exe(Path(paths.scoring_venv) / "bin" / "vf-eval", "exit 0")
    if marker:
        (root / f".bootstrapped-{pins_fingerprint()}").touch()
    return os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
