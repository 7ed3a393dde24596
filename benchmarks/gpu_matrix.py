"""GPU benchmark matrix: one standard prime-rl job per base model on THIS pod's GPU type -> time and cost.

The fleet ladder should be data-driven: which GPU type finishes a job cheapest. Each pod can only
measure its own GPU type, so this script runs the standard job (calc_chain, the ``_v1_fast`` bounds, a
fixed ``[prime_rl]`` table, a train-split env package built from the family) for each base model through
the real :class:`adapters.prime_rl.PrimeRLRunner` (install, dry run, ``rl``, then vLLM + ``vf-eval`` pre
and post scoring), and merges its rows into ``fixtures/gpu_matrix.json``::

    {"format": 1, "version": 4, "updated": "...", "pins": "...", "job": {...},
     "rows": [{"gpu_type": "NVIDIA H100 80GB HBM3", "gpus": 2, "model": "Qwen/Qwen3-0.6B", "ok": true,
               "failure": null, "train_s": 311.2, "pre_score_s": 95.0, "post_score_s": 97.4, "total_s": 520.3,
               "peak_memory_gib": 31.2, "pre": 0.21, "post": 0.34, "usd_per_hour": 5.98, "usd_per_job": 0.864,
               "measured_at": "2026-12-01"}],
     "ladder": {"Qwen/Qwen3-0.6B": ["NVIDIA RTX A6000", "NVIDIA H100 80GB HBM3"]}}

``ladder`` lists, per model, the GPU types whose job succeeded, cheapest per job first (what
``[fleet] ladder`` takes). Without a GPU (no ``nvidia-smi`` or no device) it prints the plan and exits 2.

    .venv/bin/python benchmarks/gpu_matrix.py [--models Qwen/Qwen3-0.6B,Qwen/Qwen3-1.7B] [--steps 10]
        [--prime-rl-dir /opt/ait/prime-rl] [--vllm CMD] [--vf-eval CMD] [--eval-limit N]
        [--out fixtures/gpu_matrix.json]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.prime_rl import pins  # noqa: E402
from adapters.prime_rl.runner import PrimeRLRunner, RunnerSettings  # noqa: E402
from handlers.ports.inner_trainer import JobBundle, JobResult, Progress  # noqa: E402

FORMAT = 1
FAMILY = "calc_chain"
SPEC = "calc_chain_v1_fast"
MODELS = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")


def standard_table(model: str, steps: int) -> dict[str, Any]:
    """The benchmark job's ``[prime_rl]``: inside the fast bounds, the shape of a typical agent job."""
    return {
        "model": model,
        "learning_rate": 2e-6,
        "max_steps": steps,
        "batch_size": 32,
        "group_size": 8,
        "temperature": 1.0,
        "max_tokens": 256,
        "seq_len": 1024,
        "max_turns": 8,
    }


def detect_gpus() -> list[tuple[str, float]]:
    """(name, memory GiB) of each visible GPU, from nvidia-smi; [] when there is none."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        name, _, mem = line.rpartition(",")
        if name.strip():
            gpus.append((name.strip(), float(mem) / 1024.0))
    return gpus


def write_bundle(root: Path, model: str, steps: int) -> JobBundle:
    """job.toml + task_spec.json + a train-split env package (self-contained: verifiers + msgspec only)."""
    from families import get_family
    from families.eval_env import build_eval_package

    family = get_family(FAMILY)
    train = [family.generate("train", seed) for seed in range(256)]
    pkg = build_eval_package(FAMILY, root, tasks=train)
    lines = ["[prime_rl]"] + [f"{k} = {json.dumps(v)}" for k, v in standard_table(model, steps).items()]
    lines += ["", "[env]", f'id = "{pkg.env_id}"', f'path = "{Path(pkg.path).name}"']
    (root / "job.toml").write_text("\n".join(lines) + "\n")
    shutil.copy(ROOT / "examples" / "tasks" / f"{SPEC}.json", root / "task_spec.json")
    return JobBundle(job_id=f"bench-{model.split('/')[-1].lower()}", family=FAMILY, root=str(root))


def row(
    gpu_type: str, gpus: int, model: str, result: JobResult, usd_per_hour: float | None, today: str
) -> dict[str, Any]:
    t = result.timings
    total = t.get("total", 0.0)
    return {
        "gpu_type": gpu_type,
        "gpus": gpus,
        "model": model,
        "ok": result.ok,
        "failure": result.failure,
        "detail": result.detail[:300],
        "train_s": t.get("train"),
        "pre_score_s": t.get("pre_score"),
        "post_score_s": t.get("post_score"),
        "total_s": total,
        "peak_memory_gib": result.metrics.get("peak_memory_gib"),
        "pre": result.pre,
        "post": result.post,
        "usd_per_hour": usd_per_hour,
        "usd_per_job": round(usd_per_hour * total / 3600.0, 4) if usd_per_hour is not None else None,
        "measured_at": today,
    }


def merge(
    existing: dict[str, Any] | None, rows: Sequence[dict[str, Any]], job: dict[str, Any], today: str
) -> dict[str, Any]:
    """Replace rows of the same (gpu_type, gpus, model), keep the others; recompute the ladder."""
    old = list(existing.get("rows", [])) if existing else []
    keys = {(r["gpu_type"], r["gpus"], r["model"]) for r in rows}
    kept = [r for r in old if (r["gpu_type"], r["gpus"], r["model"]) not in keys]
    merged = sorted([*kept, *rows], key=lambda r: (r["model"], r["gpu_type"], r["gpus"]))
    return {
        "format": FORMAT,
        "version": (existing or {}).get("version", 0) + 1,
        "updated": today,
        "pins": pins.pins_summary(),
        "job": job,
        "rows": merged,
        "ladder": ladder(merged),
    }


def ladder(rows: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Per model: GPU types whose job succeeded and has a cost, cheapest per job first (one entry per type)."""
    out: dict[str, list[str]] = {}
    for model in sorted({r["model"] for r in rows}):
        costed = [r for r in rows if r["model"] == model and r["ok"] and r.get("usd_per_job") is not None]
        best: dict[str, float] = {}
        for r in costed:
            best[r["gpu_type"]] = min(best.get(r["gpu_type"], float("inf")), r["usd_per_job"])
        out[model] = sorted(best, key=lambda g: (best[g], g))
    return out


def gpu_price(gpu_type: str, override: float | None, count: int) -> float | None:
    if override is not None:
        return override * count
    from handlers.budget.prices import UnknownPrice, load_prices

    try:
        return load_prices().gpu(gpu_type).usd_per_hour * count
    except UnknownPrice:
        return None


async def run_matrix(
    models: Sequence[str],
    *,
    steps: int,
    gpu_type: str,
    gpus: int,
    make_runner: Callable[[Path], PrimeRLRunner],
    usd_per_hour: float | None,
    work: Path,
    today: str,
) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        bundle_dir = work / "bundles" / model.replace("/", "--")
        bundle_dir.mkdir(parents=True, exist_ok=True)
        bundle = write_bundle(bundle_dir, model, steps)

        async def progress(p: Progress, model: str = model) -> None:
            print(f"  [{model}] {p.phase}: {p.message}", flush=True)

        result = await make_runner(work).run(bundle, progress)
        print(
            f"  [{model}] ok={result.ok} failure={result.failure} pre={result.pre} post={result.post} "
            f"timings={result.timings}",
            flush=True,
        )
        rows.append(row(gpu_type, gpus, model, result, usd_per_hour, today))
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--prime-rl-dir", default="/opt/ait/prime-rl")
    p.add_argument("--vllm", default=None, help="default: <prime-rl-dir>/.venv/bin/vllm")
    p.add_argument("--vf-eval", default="/opt/ait/score-venv/bin/vf-eval")
    p.add_argument("--eval-limit", type=int, default=None, help="score the first N hidden tasks only")
    p.add_argument("--gpus", type=int, default=None, help="GPUs per job (default: 2 if present, else 1)")
    p.add_argument("--gpu-type", default=None, help="override the detected GPU name (a Runpod gpuTypeId)")
    p.add_argument("--usd-per-hour", type=float, default=None, help="per-GPU price override")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--out", default=str(ROOT / "fixtures" / "gpu_matrix.json"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    detected = detect_gpus()
    gpus = args.gpus or (2 if len(detected) >= 2 else 1)
    print(f"GPU matrix: pins {pins.pins_summary()}")
    table_text = standard_table("<model>", args.steps)
    print(f"plan: {len(models)} job(s) on {gpus} GPU(s): {', '.join(models)}; job {SPEC} {table_text}")
    if not detected:
        print("no GPU found (nvidia-smi missing or lists no device): nothing measured; run this on a GPU pod.")
        return 2
    if len(detected) < gpus:
        print(f"--gpus {gpus} but only {len(detected)} GPU(s) visible: {detected}")
        return 2
    gpu_type = args.gpu_type or detected[0][0]
    price = gpu_price(gpu_type, args.usd_per_hour, gpus)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    vllm = shlex.split(args.vllm) if args.vllm else [f"{args.prime_rl_dir}/.venv/bin/vllm"]

    def make_runner(work: Path) -> PrimeRLRunner:
        from adapters.vllm import ScorerSettings, VLLMScorer
        from families.eval_env import build_eval_package

        settings = RunnerSettings(
            work_root=str(work / "jobs"), prime_rl_dir=args.prime_rl_dir, gpus=gpus, eval_limit=args.eval_limit
        )
        scorer = VLLMScorer(ScorerSettings(vllm_command=tuple(vllm), vf_eval_command=tuple(shlex.split(args.vf_eval))))

        async def eval_source(job: JobBundle) -> Path:
            return Path(build_eval_package(job.family, work / "hidden").path)

        return PrimeRLRunner(settings, scorer=scorer, eval_source=eval_source)

    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ait-gpu-matrix-"))
    rows = asyncio.run(
        run_matrix(
            models,
            steps=args.steps,
            gpu_type=gpu_type,
            gpus=gpus,
            make_runner=make_runner,
            usd_per_hour=price,
            work=work,
            today=today,
        )
    )
    out = Path(args.out)
    existing = json.loads(out.read_text()) if out.exists() else None
    job = {
        "family": FAMILY,
        "spec": SPEC,
        "prime_rl": standard_table("<model>", args.steps),
        "eval_limit": args.eval_limit,
    }
    table = merge(existing, rows, job, today)
    out.write_text(json.dumps(table, indent=2) + "\n")
    for r in rows:
        print(
            f"{r['gpu_type']} x{r['gpus']} {r['model']}: ok={r['ok']} total {r['total_s']:.0f}s "
            f"train {r['train_s']}s peak {r['peak_memory_gib']} GiB ${r['usd_per_job']}"
        )
    print(f"wrote {out} (version {table['version']}); ladder: {table['ladder']}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
