"""One ``vf-eval`` run of a hidden-eval package against a served model, in its own process.

The eval runs from the *scoring* venv (verifiers 0.4.0, where ``vf-eval`` is the v1 CLI) with only the
eval package on ``PYTHONPATH``: the agent's env package was installed into prime-rl's venv, so no agent
code is importable here. ``HOME``, ``UV_CACHE_DIR`` and ``TMPDIR`` point into the scoring work dir
(verifiers caches its harness runtime under ``$HOME`` and leaves ``vf-port-*`` files in the temp dir).
Arguments: the ``null`` harness (plain chat loop over the package's MCP tools), the ``subprocess``
runtime (the default is remote Prime sandboxes), one rollout per task, ``-c`` kept in 8..32 (at the
default 128 the harness times out reaching the tool server and rollouts fail while the exit code stays 0),
``--no-push`` (the default uploads to the Prime platform) and ``--no-rich``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from adapters.prime_rl.procgroup import ProcResult, run_to_end, tail_text

from .traces import EvalOutcome, TracesError, parse_traces
from .types import EvalPackageRef, EvalSampling, ScoringFailed

__all__ = ["API_KEY_VAR", "MAX_CONCURRENCY", "MIN_CONCURRENCY", "EvalRun", "run_vf_eval", "vf_eval_args"]

MIN_CONCURRENCY, MAX_CONCURRENCY = 8, 32
API_KEY_VAR = "AIT_EVAL_API_KEY"  # names an env var; the local server needs no real key


class EvalRun(msgspec.Struct, frozen=True, kw_only=True):
    outcome: EvalOutcome
    traces_path: str
    proc: ProcResult


def vf_eval_args(
    package: EvalPackageRef,
    *,
    base_url: str,
    model: str,
    sampling: EvalSampling,
    concurrency: int,
    output_dir: Path,
    run_name: str,
) -> list[str]:
    """The arguments after the executable (``vf-eval``)."""
    if not MIN_CONCURRENCY <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"vf-eval concurrency {concurrency} outside [{MIN_CONCURRENCY}, {MAX_CONCURRENCY}]")
    args = [
        package.env_id,
        "-m",
        model,
        "--client.base-url",
        base_url,
        "--client.api-key-var",
        API_KEY_VAR,
        "--env.agent.harness.id",
        "null",
        "--env.agent.runtime.type",
        "subprocess",
        "--env.agent.max-turns",
        str(sampling.max_turns),
        "--sampling.temperature",
        repr(float(sampling.temperature)),
        "--sampling.max-tokens",
        str(sampling.max_tokens),
        "-r",
        "1",
        "-c",
        str(concurrency),
        "--no-push",
        "--no-rich",
        "-o",
        str(output_dir),
        "--run.name",
        run_name,
    ]
    if sampling.limit is not None:
        args += ["-n", str(sampling.limit)]
    return args


def _eval_env(package: EvalPackageRef, workdir: Path, extra: Mapping[str, str]) -> dict[str, str]:
    home = workdir / "home"
    tmp = workdir / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "SSL_CERT_FILE", "UV_PYTHON", "UV_INDEX_URL", "PIP_INDEX_URL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env |= {"HOME": str(home), "UV_CACHE_DIR": str(home / "uv"), "TMPDIR": str(tmp)}
    env |= dict(extra)  # e.g. a shared UV_CACHE_DIR on a pod
    # Never overridable: the eval package is the only importable code, and the key is a placeholder.
    return env | {"PYTHONPATH": package.path, API_KEY_VAR: "local"}


async def run_vf_eval(
    command: Sequence[str],
    package: EvalPackageRef,
    *,
    base_url: str,
    model: str,
    sampling: EvalSampling,
    workdir: Path,
    concurrency: int = 16,
    timeout_s: float = 3600.0,
    env: Mapping[str, str] | None = None,
    run_name: str = "eval",
) -> EvalRun:
    """Run ``vf-eval`` and parse its ``traces.jsonl``; a missing or short file is :class:`ScoringFailed`."""
    out = workdir / "out"
    argv = [
        *command,
        *vf_eval_args(
            package,
            base_url=base_url,
            model=model,
            sampling=sampling,
            concurrency=concurrency,
            output_dir=out,
            run_name=run_name,
        ),
    ]
    log_path = workdir / "vf-eval.log"
    proc = await run_to_end(
        argv, cwd=workdir, env=_eval_env(package, workdir, env or {}), log_path=log_path, timeout_s=timeout_s
    )
    traces = out / run_name / "traces.jsonl"
    if proc.timed_out:
        raise ScoringFailed(f"vf-eval did not finish within {timeout_s:.0f}s", tail_text(log_path, 6000))
    if not traces.is_file():
        raise ScoringFailed(
            f"vf-eval (exit {proc.returncode}) wrote no {traces.relative_to(workdir)}", tail_text(log_path, 6000)
        )
    try:
        outcome = parse_traces(traces)
    except TracesError as exc:
        raise ScoringFailed(str(exc), tail_text(log_path, 6000)) from None
    expected = min(package.tasks, sampling.limit) if sampling.limit is not None else package.tasks
    if outcome.n != expected:
        raise ScoringFailed(
            f"vf-eval (exit {proc.returncode}) produced {outcome.n} episodes, expected {expected}",
            tail_text(log_path, 6000),
        )
    return EvalRun(outcome=outcome, traces_path=str(traces), proc=proc)
