"""Ground truth for the CPU replica: the mean reward of each of its trainer agent's 16 choices, measured with real jobs.

For every choice (base model x rubric env x learning rate, ``handlers.episode.choice``) on each family (default
calc_chain and ledger, the replica's training families) and each repeat, the job an episode with that choice
submits is built and run exactly as ``ait train`` builds and runs it: the replica's workspace (``template_files`` on
``examples/replica/template``), the choice's ``job.toml`` (``job_text``), the deterministic job bundle
(``make_bundle``) unpacked as the pod agent unpacks it, and the pod agent's ``cpu`` trainer
(``adapters.cpu_trainer.make_trainer`` with the ``--trainer-opt`` options): real GRPO on the tiny inner model in
its sandboxed child, post-scored on the spec's hidden eval. One trainer serves every job, as a warm pod does (the
base model's pre-score is computed once per model and family). The reward is the real formula
(``handlers.reward.formula.compute_reward``) with the replica's ``[reward]`` (examples/configs/replica.toml: no
speed term, wall time is not reproducible) for a first-try validation, ``best_pre`` frozen = the best untrained
model's score on the same hidden tasks (the jobs' own pre-scores, both models).

Repeat r trains with trainer seed ``--seed + r`` (``--same-seed``: every repeat uses ``--seed``, a determinism
check). Prints per job and a table per choice: mean reward over families x repeats with a bootstrap 95% interval,
and writes a JSON the report reads (``--json``, default ``examples/replica/grid.json``).

    .venv/bin/python benchmarks/replica_grid.py [--families calc_chain,ledger] [--repeats 2] [--seed 0]
        [--choices 0.6B/correct/1e-05,1.7B/wrong/3e-05] [--trainer-opt threads=1] [--same-seed] [--probe] [--json PATH]

The hidden sets are the committed test key's (``tests/data/eval-test.key``) unless ``AIT_EVAL_KEY_FILE`` is set.
``--probe`` also validates each workspace with the real sandboxed probe (rubric check reported, not enforced,
as in the replica) before its job runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import fmean
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from families import key_fingerprint  # noqa: E402
from families.spec import TaskSpec, load_spec  # noqa: E402
from handlers.episode.bundle import make_bundle, unpack_bundle  # noqa: E402
from handlers.episode.choice import Choice, all_choices, job_text  # noqa: E402
from handlers.episode.setup import template_files  # noqa: E402
from handlers.ports.inner_trainer import JobBundle, JobResult, Progress  # noqa: E402
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward  # noqa: E402

TEMPLATE = ROOT / "examples" / "replica" / "template"
TASKS = ROOT / "examples" / "replica" / "tasks"
CONFIG = ROOT / "examples" / "configs" / "replica.toml"


def replica_reward() -> RewardConfig:
    """The replica config's ``[reward]`` (no speed term: wall time is not reproducible), else the same weights."""
    if CONFIG.exists():
        import tomllib

        return RewardConfig.from_mapping(tomllib.loads(CONFIG.read_text()).get("reward", {}), source=str(CONFIG))
    return RewardConfig(w_validation=0.35, w_quality=0.65, w_speed=0.0)


REWARD = replica_reward()


def spec_of(family: str) -> tuple[TaskSpec, bytes]:
    path = TASKS / f"{family}_v1_fast.json"
    return load_spec(path), path.read_bytes()


def bootstrap_ci(values: list[float], *, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap 95% interval of the mean (a single value: that value twice)."""
    if len(values) < 2:
        v = values[0] if values else float("nan")
        return v, v
    rng = random.Random(seed)
    means = sorted(fmean(rng.choices(values, k=len(values))) for _ in range(n_boot))
    return means[int(0.025 * n_boot)], means[int(0.975 * n_boot) - 1]


def cpu_seconds() -> float:
    """This process (every thread: the trainer's scoring), user + system. The training child runs under bubblewrap
    and is not reaped here: its CPU comes from its own report (``timings["train_cpu"]``)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


async def noop(_: Progress) -> None:
    return None


def with_overrides(text: str, overrides: dict[str, str]) -> str:
    """``job.toml`` with some fixed ``[prime_rl]`` lines replaced (sizing experiments only: not the replica's job)."""
    lines = text.splitlines()
    for key, value in overrides.items():
        at = [i for i, line in enumerate(lines) if line.split(" = ")[0] == key]
        if not at:
            raise SystemExit(f"--job-set {key}: not a line of the replica's job.toml")
        lines[at[0]] = f"{key} = {value}"
    return "\n".join(lines) + "\n"


async def run_job(
    trainer: Any,
    family: str,
    spec: TaskSpec,
    spec_json: bytes,
    choice: Choice,
    seed: int,
    probe: Any,
    overrides: dict[str, str],
) -> dict[str, Any]:
    files = template_files(spec, max_attempts=3, reward=REWARD, template_dir=TEMPLATE)
    files["job.toml"] = with_overrides(job_text(choice, spec), overrides).encode()
    job_id = f"grid-{family}-{choice.label.replace('/', '-')}-s{seed}"
    with tempfile.TemporaryDirectory(prefix="replica-grid-") as tmp:
        probe_ok: bool | None = None
        if probe is not None:
            ws = Path(tmp) / "workspace"
            for rel, data in files.items():
                (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / rel).write_bytes(data)
            report = await probe.validate(ws, spec, 1)
            probe_ok = report.ok
            if not report.ok:
                print(f"  probe rejected {choice.label}: {[(c.name, c.detail) for c in report.checks if not c.ok]}")
        root = Path(tmp) / "bundle"
        root.mkdir()
        unpack_bundle(make_bundle(files, spec_json), root)  # what the pod agent does with the dispatched blob
        cpu0, t0 = cpu_seconds(), time.monotonic()
        trainer.seed = seed  # the trainer's training seed (its ``seed`` option): one warm trainer for all jobs
        result: JobResult = await trainer.run(JobBundle(job_id=job_id, family=family, root=str(root)), noop)
        wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0 + result.timings.get("train_cpu", 0.0)
    return {
        "family": family,
        "label": choice.label,
        "model": choice.model,
        "rubric": choice.rubric,
        "seed": seed,
        "ok": result.ok,
        "failure": result.failure,
        "pre": result.pre,
        "post": result.post,
        "eval_n": result.eval_n,
        "train_seconds": result.train_seconds,
        "steps_done": result.steps_done,
        "stop_reason": result.stop_reason,
        "timings": result.timings,
        "train_reward_mean": result.metrics.get("train_reward_mean"),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "probe_ok": probe_ok,
        "detail": result.detail[:300] if not result.ok else "",
    }


def reward_of(job: dict[str, Any], best_pre: float) -> float:
    ok = job["ok"] and job["post"] is not None
    inputs = RewardInputs(
        episode_id=f"ep-{job['label']}",
        parseable=True,
        attempts=1,
        validated=True,
        job_status="succeeded" if ok else "failed",
        post=job["post"] if ok else None,
        best_pre=best_pre if ok else None,
        train_seconds=job["train_seconds"] if ok else None,
        family=job["family"],
    )
    return compute_reward(inputs, REWARD).reward


def summarise(jobs: list[dict[str, Any]], choices: list[Choice], families: list[str]) -> dict[str, Any]:
    baselines: dict[str, dict[str, float]] = {}
    for job in jobs:
        if job["pre"] is not None:
            baselines.setdefault(job["family"], {})[job["model"]] = job["pre"]
    for job in jobs:
        job["best_pre"] = max(baselines.get(job["family"], {}).values(), default=0.0)
        job["reward"] = round(reward_of(job, job["best_pre"]), 6)
    table: dict[str, Any] = {}
    for choice in choices:
        mine = [j for j in jobs if j["label"] == choice.label]
        rewards = [j["reward"] for j in mine]
        lo, hi = bootstrap_ci(rewards)
        per_family = {}
        for family in families:
            fj = [j for j in mine if j["family"] == family]
            posts = [j["post"] for j in fj if j["post"] is not None]
            per_family[family] = {
                "reward_mean": round(fmean(j["reward"] for j in fj), 4) if fj else None,
                "post_mean": round(fmean(posts), 4) if posts else None,
                "n": len(fj),
            }
        table[choice.label] = {
            "model": choice.model,
            "rubric": choice.rubric,
            "mean": round(fmean(rewards), 4) if rewards else None,
            "ci95": [round(lo, 4), round(hi, 4)],
            "n": len(rewards),
            "per_family": per_family,
        }
    scored = {k: v for k, v in table.items() if v["mean"] is not None}
    top = max(scored, key=lambda k: scored[k]["mean"]) if scored else None
    # The best choices: the top one and every choice the grid cannot tell from it. Paired, since the families'
    # rewards differ far more than the choices' (ledger's bases score higher): the difference to the top choice on
    # the same family and seed, its bootstrap 95% interval; a choice whose interval reaches 0 is among the best.
    best: list[str] = []
    if top is not None:
        by_key = {(j["label"], j["family"], j["seed"]): j["reward"] for j in jobs}
        for label, row in scored.items():
            diffs = [
                by_key[(top, f, s)] - r for (lab, f, s), r in by_key.items() if lab == label and (top, f, s) in by_key
            ]
            lo, hi = bootstrap_ci(diffs) if diffs else (0.0, 0.0)
            row["vs_top"] = {"mean": round(fmean(diffs), 4) if diffs else 0.0, "ci95": [round(lo, 4), round(hi, 4)]}
            if label == top or lo <= 0.0:
                best.append(label)
        best.sort(key=lambda k: -scored[k]["mean"])
    return {"baselines": baselines, "choices": table, "best": best, "top": top}


def weights_version() -> str:
    """The tiny inner models the figures used: the last commit that touched fixtures/tiny."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h %cs %s", "--", "fixtures/tiny"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()[:120]
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def print_table(summary: dict[str, Any], families: list[str]) -> None:
    head = f"{'choice':<16} {'mean reward':>11} {'95% CI':>17} {'n':>3}  " + "  ".join(
        f"{f + ' post':>15}" for f in families
    )
    print(head)
    print("-" * len(head))
    rows = sorted(summary["choices"].items(), key=lambda kv: -(kv[1]["mean"] if kv[1]["mean"] is not None else -9))
    for label, row in rows:
        lo, hi = row["ci95"]
        means = [row["per_family"][f]["post_mean"] for f in families]
        posts = "  ".join(f"{m:>15.3f}" if m is not None else f"{'-':>15}" for m in means)
        mark = " *" if label in summary["best"] else ""
        print(f"{label:<16} {row['mean']:>11.3f} {f'[{lo:.3f}, {hi:.3f}]':>17} {row['n']:>3}  {posts}{mark}")
    print(f"baselines (pre, frozen best_pre = max): {summary['baselines']}")
    print(f"best choices (*): {summary['best']}")


def markdown_table(summary: dict[str, Any], families: list[str]) -> str:
    """The per-choice table as docs/replica.md shows it (best first)."""
    head = "| choice | mean reward | 95% CI | n | top minus it (95% CI) | " + " | ".join(f"{f} post" for f in families)
    lines = [head + " |", "|---|---:|---|---:|---|" + "---:|" * len(families)]
    rows = sorted(summary["choices"].items(), key=lambda kv: -(kv[1]["mean"] if kv[1]["mean"] is not None else -9))
    for label, row in rows:
        lo, hi = row["ci95"]
        posts = " | ".join(
            "-" if row["per_family"][f]["post_mean"] is None else f"{row['per_family'][f]['post_mean']:.3f}"
            for f in families
        )
        name = f"**{label}**" if label in summary["best"] else label
        vs = row.get("vs_top", {"mean": 0.0, "ci95": [0.0, 0.0]})
        paired = f"{vs['mean']:+.3f} [{vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f}]"
        lines.append(f"| {name} | {row['mean']:.3f} | [{lo:.3f}, {hi:.3f}] | {row['n']} | {paired} | {posts} |")
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default="calc_chain,ledger")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--same-seed", action="store_true", help="every repeat trains with --seed (determinism)")
    parser.add_argument("--choices", default="", help="comma-separated labels (default: all 16)")
    parser.add_argument("--trainer-opt", action="append", default=[], help="key=value, as [inner] trainer_options")
    parser.add_argument("--probe", action="store_true", help="validate each workspace with the real probe first")
    parser.add_argument(
        "--job-set", action="append", default=[], help="key=value: replace a fixed job.toml line (sizing only)"
    )
    parser.add_argument("--json", type=Path, default=ROOT / "examples" / "replica" / "grid.json")
    parser.add_argument("--append", type=Path, action="append", default=[], help="a grid JSON whose jobs to include")
    args = parser.parse_args(argv)
    os.environ.setdefault("AIT_EVAL_KEY_FILE", str(ROOT / "tests" / "data" / "eval-test.key"))

    from adapters.cpu_trainer import make_trainer

    options = dict(o.split("=", 1) for o in args.trainer_opt)
    overrides = dict(o.split("=", 1) for o in args.job_set)
    trainer = make_trainer(options)
    probe = None
    if args.probe:
        from adapters.probe import ProbeValidator

        probe = ProbeValidator(enforce_rubric=False)
    families = [f for f in args.families.split(",") if f]
    wanted = {c for c in args.choices.split(",") if c}
    choices = [c for c in all_choices() if not wanted or c.label in wanted]
    if wanted - {c.label for c in choices}:
        parser.error(f"unknown choice(s) {sorted(wanted - {c.label for c in choices})}")
    specs = {f: spec_of(f) for f in families}
    jobs: list[dict[str, Any]] = []
    started = time.monotonic()
    for r in range(args.repeats):
        seed = args.seed if args.same_seed else args.seed + r
        for family in families:
            spec, spec_json = specs[family]
            for choice in choices:
                job = await run_job(trainer, family, spec, spec_json, choice, seed, probe, overrides)
                jobs.append(job)
                print(
                    f"{family:<11} {choice.label:<16} seed {seed}: pre {job['pre']} post {job['post']} "
                    f"({job['stop_reason'] or job['failure']}, {job['steps_done']} steps) "
                    f"{job['cpu_s']:.1f} CPU-s {job['wall_s']:.1f} s",
                    flush=True,
                )
    for prior in args.append:  # earlier runs' jobs (other seeds), summarised together with these
        jobs = [j for j in json.loads(prior.read_text())["jobs"] if j["family"] in families] + jobs
    summary = summarise(jobs, choices, families)
    total_wall, total_cpu = time.monotonic() - started, sum(j["cpu_s"] for j in jobs)
    print()
    print(
        f"replica grid: {len(jobs)} jobs ({len(families)} families x {len(choices)} choices, seeds "
        f"{sorted({j['seed'] for j in jobs})}), {total_cpu:.0f} CPU-s, {total_wall:.0f} s wall; reward config {REWARD}"
    )
    print_table(summary, families)
    print()
    print(markdown_table(summary, families))
    doc = {
        "command": "python benchmarks/replica_grid.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "weights": weights_version(),
        "eval_key": "committed test key" if "eval-test.key" in os.environ["AIT_EVAL_KEY_FILE"] else "own key",
        # ait report compares it with the key a run's baselines were frozen under (other key: other hidden tasks).
        "eval_key_fingerprint": key_fingerprint(),
        "families": families,
        "repeats": len({j["seed"] for j in jobs}),
        "seeds": sorted({j["seed"] for j in jobs}),
        "trainer_options": options,
        "job_overrides": overrides,
        "reward": {"w_validation": REWARD.w_validation, "w_quality": REWARD.w_quality, "w_speed": REWARD.w_speed},
        "cpu_s": round(total_cpu, 1),
        "wall_s": round(total_wall, 1),
        **summary,
        "jobs": jobs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
