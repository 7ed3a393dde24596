"""``make_trainer(options)``: the prime-rl inner trainer as the pod agent builds it (``--trainer prime_rl``).

Options (``--trainer-opt key=value``, all optional): ``root`` (the bootstrap root, default ``/opt/ait``:
prime-rl in ``<root>/prime-rl``, the scoring venv in ``<root>/score-venv``), ``work_root`` (default
``<root>/jobs``), ``gpus`` (1 or 2; default: the visible GPU count, at most 2), ``score_pre`` (``0``/``1``),
``eval_limit`` (score only the first N hidden tasks: benchmarks, never production), ``vllm`` and
``vf_eval`` (commands), ``eval_from`` (``controller``, the default, or ``local``).

The hidden eval package comes from the controller: the pod agent binds the runner's eval source to its
``await_eval`` (see ``adapters.pod.core``), so once training has ended the job asks for it and the engine
sends the package it built under its own installation key. The pod never builds a hidden set: it has no
key (or another one). ``eval_from=local`` builds it here from the installed ``families`` and this machine's
key (:func:`hidden_package_source`): only for a machine that *is* the engine's (benchmarks), never a pod.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from handlers.ports.inner_trainer import JobBundle

from .bootstrap import BootstrapPaths
from .runner import EvalSource, PrimeRLRunner, RunnerSettings

__all__ = ["controller_only_source", "hidden_package_source", "make_trainer", "visible_gpus"]


def visible_gpus() -> int:
    """GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``; 0 without any."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


async def controller_only_source(job: JobBundle) -> Path:
    """The default until the pod agent binds its own: a runner outside an agent has no eval package."""
    raise OSError(
        f"job {job.job_id}: no hidden eval package source; the pod agent receives it from the controller "
        "(run under `ait pod-agent`), or set eval_from=local on the engine's own machine"
    )


def hidden_package_source(work_root: Path) -> EvalSource:
    """Build the family's hidden eval package here (this machine's key!), when the runner asks (after training)."""

    async def source(job: JobBundle) -> Path:
        from families.eval_env import build_eval_package

        return Path(build_eval_package(job.family, work_root / job.job_id / "score" / "hidden").path)

    return source


def _train_uid(value: str) -> int | None:
    """``train_uid=none`` (default: training as the agent's uid) | ``auto`` (a fresh unprivileged uid) | a number."""
    if value == "none":
        return None
    if value == "auto":
        from adapters.sandbox import fresh_uid

        return fresh_uid()
    if value.isascii() and value.isdigit() and int(value) > 0:  # isdigit() alone takes "²"
        return int(value)
    raise ValueError(f"prime_rl trainer: train_uid={value!r}; expected none, auto or a uid above 0")


def make_trainer(options: Mapping[str, str]) -> PrimeRLRunner:
    from adapters.vllm import ScorerSettings, VLLMScorer

    paths = BootstrapPaths(options.get("root", "/opt/ait"))
    work_root = Path(options.get("work_root", f"{paths.root}/jobs"))
    gpus = int(options.get("gpus", 0)) or min(visible_gpus(), 2)
    if gpus not in (1, 2):
        raise ValueError(f"prime_rl trainer: needs 1 or 2 GPUs, found {gpus} (set gpus=1|2 to override)")
    env = {"UV_CACHE_DIR": paths.uv_cache, "HF_HOME": paths.hf_home}
    limit = options.get("eval_limit")
    settings = RunnerSettings(
        train_uid=_train_uid(options.get("train_uid", "none")),
        work_root=str(work_root),
        prime_rl_dir=paths.prime_rl,
        gpus=gpus,
        env=env,
        score_pre=options.get("score_pre", "1") not in ("0", "false", "no"),
        eval_limit=int(limit) if limit else None,
        hf_home=paths.hf_home,
    )
    vllm = shlex.split(options.get("vllm", f"{paths.prime_rl}/.venv/bin/vllm"))
    vf_eval = shlex.split(options.get("vf_eval", f"{paths.scoring_venv}/bin/vf-eval"))
    scorer = VLLMScorer(ScorerSettings(vllm_command=tuple(vllm), vf_eval_command=tuple(vf_eval), env=env))
    eval_from = options.get("eval_from", "controller")
    if eval_from not in ("controller", "local"):
        raise ValueError(f"prime_rl trainer: eval_from={eval_from!r}; expected controller or local")
    source = hidden_package_source(work_root) if eval_from == "local" else controller_only_source
    return PrimeRLRunner(settings, scorer=scorer, eval_source=source)
