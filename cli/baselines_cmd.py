"""``ait baselines [--inner cpu|gpu]``: score each base model on each family's hidden eval once; freeze best_pre.

``--inner cpu`` scores the tiny CPU checkpoints (stand-ins for the Qwen3 bases) in process with
``adapters.tiny.score_hidden``; ``--inner gpu`` serves each Qwen3 base with vLLM on this (GPU) machine
and runs the family's hidden eval package with ``vf-eval`` (``adapters.vllm``), at the same sampling the
GPU jobs are scored with. Pairs already frozen are skipped (``--force`` re-freezes everything). Each score
becomes a ``baseline.frozen`` event in ``<runs-root>/baselines/events.jsonl`` and an entry of the
versioned file (default ``~/.config/ait/baselines/<inner>.json``, see ``handlers.reward.baselines``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["CPU_SCORED_BY", "cpu_score_fn", "make_score_fn", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("baselines", help="freeze each base model's hidden-eval score per family (best_pre)")
    p.add_argument("--inner", choices=["cpu", "gpu"], default="cpu", help="tiny CPU models or Qwen3 on vLLM")
    p.add_argument("--family", action="append", help="a family to score (repeatable; default: all)")
    p.add_argument("--model", action="append", help="a base model to score (repeatable; default: all)")
    p.add_argument(
        "--out",
        default=None,
        help="baselines file (default: $AIT_BASELINES_DIR or ~/.config/ait/baselines/<inner>.json)",
    )
    p.add_argument("--force", action="store_true", help="re-score and replace every frozen pair")
    p.add_argument("--limit", type=int, default=None, help="only the first N hidden tasks (smoke runs only)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (cpu)")
    p.add_argument(
        "--key-fingerprint",
        default=None,
        help="fingerprint to freeze under (default: the installation key's, see docs/eval-integrity.md)",
    )
    gpu = p.add_argument_group("--inner gpu")
    gpu.add_argument("--vllm", default="vllm", help="the vllm command (e.g. /opt/ait/prime-rl/.venv/bin/vllm)")
    gpu.add_argument("--vf-eval", default="vf-eval", help="vf-eval of the scoring venv")
    gpu.add_argument("--work-dir", default=None, help="scratch dir (default: <runs-root>/baselines/work)")
    gpu.add_argument("--concurrency", type=int, default=16, help="vf-eval -c (8..32)")
    gpu.add_argument("--max-tokens", type=int, default=1024, help="max tokens per assistant turn")
    p.set_defaults(func=run)


def make_score_fn(args: argparse.Namespace) -> tuple[Any, str]:
    """(the ScoreFn, a line saying what it runs on); exits 2 with a message when it cannot run here."""
    if args.inner == "cpu":
        return cpu_score_fn(seed=args.seed, limit=args.limit, fresh=args.force), CPU_SCORED_BY
    return _gpu_score_fn(args), f"gpu: vLLM ({args.vllm}) + vf-eval ({args.vf_eval}) on this machine"


CPU_SCORED_BY = "cpu: tiny Qwen3-architecture checkpoints in process (adapters.tiny)"


def cpu_score_fn(*, seed: int, limit: int | None, on_turn: Any = None, fresh: bool = False) -> Any:
    """Score a tiny checkpoint on a family's hidden eval, as the CPU trainer scores its pre and post.

    ``on_turn(family, model)``, when given, returns the scorer's per-turn callback for that pair (progress).
    Each score is kept in this machine's score memo (``adapters.tiny.score_memo``), where the CPU trainer's
    pods find it as their jobs' pre-score; a score already there is taken from it unless ``fresh``."""
    from adapters.tiny.score_memo import ScoreMemo, memo_key
    from handlers.reward.baselines import BaselineEntry

    try:
        from adapters.tiny import load_checkpoint, score_hidden  # the documented API
    except ImportError:  # the package's re-exports are optional; the modules are not
        from adapters.tiny.model import load_checkpoint
        from adapters.tiny.scorer import score_hidden

    from adapters.tiny.scorer import EVAL_TEMPERATURE

    cache: dict[str, Any] = {}
    memo = ScoreMemo.from_env()

    async def score(family: str, model: str) -> BaselineEntry:
        import asyncio

        import torch

        # One thread, as the CPU trainer scores: a model this small gains nothing from a second one, and on a
        # busy machine the idle thread's spin-waits cost more than the work (a 15 s freeze took minutes).
        torch.set_num_threads(1)
        if model not in cache:
            cache[model] = load_checkpoint(model)  # "Qwen/Qwen3-0.6B" resolves to its tiny stand-in
        ckpt = cache[model]
        key = memo_key(ckpt, split="hidden", family=family, temperature=EVAL_TEMPERATURE, seed=seed, limit=limit)
        report = None if fresh else memo.get(key)
        if report is None:
            hook = on_turn(family, model) if on_turn is not None else None
            report = await asyncio.to_thread(score_hidden, ckpt, family, seed=seed, limit=limit, on_turn=hook)
            memo.put(key, report)
        sampling = (
            f"T={report.temperature:g}, top_p={report.top_p:g}, max_tokens={report.max_tokens}, "
            f"max_turns={report.max_turns}, seed={report.seed}, n={report.n}"
        )
        return BaselineEntry(score=report.score, n=report.n, sampling=sampling, seconds=report.seconds)

    return score


def _gpu_score_fn(args: argparse.Namespace) -> Any:
    vllm, vf_eval = shlex.split(args.vllm), shlex.split(args.vf_eval)
    for name, cmd in (("--vllm", vllm), ("--vf-eval", vf_eval)):
        if not cmd or shutil.which(cmd[0]) is None:
            raise SystemExit(
                f"ait baselines --inner gpu: {name} {cmd[0] if cmd else ''!r} not found; run it on a GPU pod"
            )
    from adapters.vllm import EvalSampling, ScorerSettings, ServedModel, VLLMScorer, load_eval_package
    from families.eval_env import build_eval_package
    from families.spec import load_spec
    from handlers.reward.baselines import BaselineEntry

    work = Path(args.work_dir or Path(args.runs_root) / "baselines" / "work")
    scorer = VLLMScorer(
        ScorerSettings(vllm_command=tuple(vllm), vf_eval_command=tuple(vf_eval), concurrency=args.concurrency)
    )
    root = Path(__file__).resolve().parents[1]

    async def score(family: str, model: str) -> BaselineEntry:
        package = load_eval_package(build_eval_package(family, work / "evalpkgs").path)
        spec = load_spec(root / "examples" / "tasks" / f"{family}_v1.json")
        sampling = EvalSampling(
            temperature=spec.eval.temperature,
            max_tokens=args.max_tokens,
            max_turns=spec.eval.max_turns,
            limit=args.limit,
        )
        out = await scorer.score(
            ServedModel.base_model(model), package, sampling, work / family / model.replace("/", "--")
        )
        return BaselineEntry(
            score=out.score, n=out.n, sampling=out.sampling, seconds=out.seconds, fingerprint=out.fingerprint
        )

    return score


def run(args: argparse.Namespace) -> int:
    from families import FAMILIES
    from families.spec import BASE_MODELS
    from handlers.reward.baselines import BaselinesError, default_baselines_path, load_baselines_file, missing_pairs

    families = args.family or list(FAMILIES)
    models = args.model or list(BASE_MODELS)
    unknown = sorted(set(families) - set(FAMILIES)) + sorted(set(models) - set(BASE_MODELS))
    if unknown:
        sys.stderr.write(
            f"ait baselines: unknown family or model {unknown}; families {list(FAMILIES)}, models {list(BASE_MODELS)}\n"
        )
        return 2
    out = Path(args.out) if args.out else default_baselines_path(args.inner)
    try:
        if args.key_fingerprint is None:
            from families import key_fingerprint

            # The hidden sets derive from the installation key: scores frozen under another key are meaningless.
            args.key_fingerprint = key_fingerprint()
        existing = load_baselines_file(out) if out.exists() and not args.force else None
        if existing is not None and existing.key_fingerprint != args.key_fingerprint:
            raise BaselinesError(
                f"{out}: frozen under eval key {existing.key_fingerprint or '(none)'!r}, but the current key is "
                f"{args.key_fingerprint!r}, so the hidden eval sets differ; re-freeze with "
                f"`ait baselines --inner {args.inner} --force` (or restore the key they were frozen under)"
            )
        todo = missing_pairs(existing, families, models)
        score_fn, ran_on = make_score_fn(args)
    except BaselinesError as exc:
        sys.stderr.write(f"ait baselines: {exc}\n")
        return 2
    except SystemExit as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    from cli.library_noise import quiet_libraries
    from engine.logs import configure_logging

    # As `ait episode`: the console shows the bar and the summary, not the scorer's debug lines or the libraries'
    # own bars ("Loading weights: 0%|..."); -v shows them.
    verbose = bool(getattr(args, "verbose", False))
    quiet_libraries(verbose)
    configure_logging(level="info", console=sys.stderr, console_level="info" if verbose else "warning")
    sys.stderr.write(f"ait baselines: {ran_on}; {len(todo)} of {len(families) * len(models)} pairs to score -> {out}\n")
    if args.limit is not None:
        sys.stderr.write(f"ait baselines: --limit {args.limit}: a smoke run, not a baseline to reward against\n")
    try:
        import asyncio

        result, scored = asyncio.run(_freeze(args, score_fn, families, models, out, len(todo)))
    except (BaselinesError, OSError, RuntimeError, BaseExceptionGroup) as exc:
        # The runtime's task group wraps errors in groups; report the first real one. Pairs scored
        # before it are already frozen in the file and the log, so a rerun continues from there.
        sys.stderr.write(f"ait baselines: failed: {_first_leaf(exc)}\n")
        return 1
    _print_summary(result, families, models, scored, out)
    return 0


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _freeze(
    args: argparse.Namespace, score_fn: Any, families: list[str], models: list[str], out: Path, total: int
) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from engine.runtime import Runtime
    from handlers.reward.baseline_projection import BaselinesProjection
    from handlers.reward.baselines import freeze_baselines

    log_dir = Path(args.runs_root) / "baselines"
    log_dir.mkdir(parents=True, exist_ok=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("families x models", total=total)

        def scored(family: str, model: str, entry: Any) -> None:
            bar.update(task, advance=1, description=f"{family} x {model}: {entry.score:.3f} (n={entry.n})")

        async with Runtime(log_dir, [BaselinesProjection()]) as runtime:
            return await freeze_baselines(
                score_fn,
                families=families,
                models=models,
                inner=args.inner,
                out_path=out,
                created=dt.datetime.now(dt.UTC).date().isoformat(),
                key_fingerprint=args.key_fingerprint,
                force=args.force,
                emit=runtime.emit,
                on_scored=scored,
            )


def _print_summary(
    result: Any, families: list[str], models: list[str], scored: list[tuple[str, str]], out: Path
) -> None:
    from handlers.reward.baseline_projection import best_pre

    table = {f: {m: e.score for m, e in ms.items()} for f, ms in result.scores.items()}
    lines = [f"baselines v{result.version} ({result.inner}) in {out}; scored now: {len(scored)}"]
    for family in families:
        cells = ", ".join(f"{m}={table.get(family, {}).get(m, float('nan')):.3f}" for m in models)
        best = best_pre(table, family)
        lines.append(f"  {family:<16} {cells}  best_pre={'-' if best is None else f'{best:.3f}'}")
    sys.stdout.write("\n".join(lines) + "\n")
