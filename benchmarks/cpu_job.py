"""CPU inner job benchmark: does a local GRPO job raise the tiny model's hidden-eval score, and how fast?

Each run is a real job through the inner-trainer port (``adapters.cpu_trainer.CpuTrainer``): a job bundle
with ``job.toml`` (within the family's ``*_v1_fast`` task bounds), the task spec and an env package; the
trainer pre-scores the base on the family's 200 hidden tasks (sampled at the spec's temperature, seeded),
trains on the env with in-process verifiers rollouts, and post-scores. Runs:

1. the reference env (``fixtures/envs/family_reference``: train-split tasks, the family's tools, reward 1
   for the right answer) on each ``--families`` entry;
2. the bad env (``fixtures/envs/reward_everything``: same tasks and tools, reward 1 for anything) on the
   first family: the hidden eval must show no real uplift;
3. the first family again with the same seed (``--repeat``): the figures must be identical.

    .venv/bin/python benchmarks/cpu_job.py [--families calc_chain,string_pipeline,ledger] [--model tiny-0.6b]
        [--seed 0] [--steps 60] [--batch 32] [--group 8] [--lr 1e-5] [--threads 1] [--no-repeat] [--json out.json]

Prints one line per step and a summary table (pre, post, uplift, wall seconds and its split). The machine's
score memo (``adapters.tiny.score_memo``) is off here: each trainer's first job scores its base, as on a machine
that never scored it, so the figures stay comparable from run to run.

``--paths cold,warm --jobs N`` instead compares the training child's two start-up paths side by side in one
run: ``N`` identical jobs (the first family, the reference env, the job's own sizes; the replica's are
``--steps 4 --batch 16 --group 4 --max-tokens 64``) on each path, each path with a trainer of its own, and per
job its wall time and CPU seconds: the engine process's own (scoring) and the training child's (cold: the
bubblewrap sandbox and interpreter, reaped by this process; warm: what the zygote's process tree used during
the job, i.e. its confined fork), plus the zygote's one-off start-up. The load average is printed with it::

    .venv/bin/python benchmarks/cpu_job.py --paths cold,warm --jobs 3 --families calc_chain \
        --steps 4 --batch 16 --group 4 --max-tokens 64 --eval-limit 16 --spec fast
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.cpu_trainer import CpuTrainer  # noqa: E402
from adapters.sandbox import tree_cpu_seconds  # noqa: E402
from adapters.tiny.score_memo import ScoreMemo  # noqa: E402
from handlers.ports.inner_trainer import JobBundle, JobResult, Progress  # noqa: E402

ENVS = ROOT / "fixtures" / "envs"
TASKS = ROOT / "examples" / "tasks"
QWEN = {"tiny-0.6b": "Qwen/Qwen3-0.6B", "tiny-1.7b": "Qwen/Qwen3-1.7B"}
_NO_MEMO = ScoreMemo(None)  # every trainer's first job scores its base (module docstring)


class Run(msgspec.Struct, kw_only=True):
    label: str
    family: str
    env: str
    seed: int
    wall_s: float
    result: dict[str, Any]
    steps: list[dict[str, Any]]

    @property
    def uplift(self) -> float | None:
        pre, post = self.result.get("pre"), self.result.get("post")
        return None if pre is None or post is None else post - pre


def write_bundle(root: Path, family: str, env_id: str, env_dir: Path, args: argparse.Namespace) -> JobBundle:
    table = {
        "model": QWEN.get(args.model, args.model),
        "learning_rate": args.lr,
        "max_steps": args.steps,
        "batch_size": args.batch,
        "group_size": args.group,
        "temperature": 1.0,
        "max_tokens": args.max_tokens,
        "max_turns": args.max_turns,
    }
    lines = ["[prime_rl]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    # The trainer takes env packages from inside the bundle, as an agent's workspace lays them out (env/<module>/).
    # The bad env builds on the reference one (it imports family_reference), so that one ships beside it.
    shutil.copytree(env_dir, root / "env" / env_dir.name)
    if env_dir.name != "family_reference":
        shutil.copytree(ENVS / "family_reference", root / "env" / "family_reference")
    lines += ["", "[env]", f'id = "{env_id}"', 'path = "env"']
    (root / "job.toml").write_text("\n".join(lines) + "\n")
    spec = TASKS / f"{family}_v1{'_fast' if args.spec == 'fast' else ''}.json"
    if spec.exists():
        shutil.copy(spec, root / "task_spec.json")
    return JobBundle(job_id=f"bench-{family}-{env_id}", family=family, root=str(root))


async def run_job(label: str, family: str, env_id: str, env_dir: Path, args: argparse.Namespace) -> Run:
    steps: list[dict[str, Any]] = []

    async def progress(p: Progress) -> None:
        if p.phase == "train":
            steps.append({"step": p.step, "reward": p.reward, "loss": p.loss, "action": p.message})
            loss = "-" if p.loss is None else f"{p.loss:+.5f}"
            print(f"  [{label}] step {p.step}/{p.total_steps} {p.message}: train reward {p.reward:.3f} loss {loss}")
        elif p.reward is not None:
            print(f"  [{label}] {p.phase}: {p.reward:.3f}")
        sys.stdout.flush()

    trainer = CpuTrainer(
        seed=args.seed, threads=args.threads, eval_limit=args.eval_limit, kl_coef=args.kl, score_memo=_NO_MEMO
    )
    with tempfile.TemporaryDirectory(prefix="cpu-job-") as tmp:
        bundle = write_bundle(Path(tmp), family, env_id, env_dir, args)
        started = time.monotonic()
        result: JobResult = await trainer.run(bundle, progress)
        wall = time.monotonic() - started
    if not result.ok:
        print(f"  [{label}] FAILED {result.failure}: {result.detail}")
    return Run(
        label=label,
        family=family,
        env=env_id,
        seed=args.seed,
        wall_s=round(wall, 1),
        result=msgspec.to_builtins(result),
        steps=steps,
    )


def table(runs: list[Run]) -> str:
    head = (
        f"{'run':<28} {'pre':>6} {'post':>6} {'uplift':>7} {'wall s':>7} {'setup':>6} {'pre s':>6} "
        f"{'rollout':>8} {'learn':>6} {'post s':>6}  steps"
    )
    lines = [head, "-" * len(head)]
    for r in runs:
        t = r.result.get("timings", {})
        m = r.result.get("metrics", {})
        fmt = lambda v: f"{v:6.3f}" if isinstance(v, float) else f"{'-':>6}"  # noqa: E731
        up = r.uplift
        lines.append(
            f"{r.label:<28} {fmt(r.result.get('pre'))} {fmt(r.result.get('post'))} "
            f"{(f'{up:+7.3f}' if up is not None else '      -')} {r.wall_s:7.1f} "
            f"{t.get('setup', 0):6.1f} "
            f"{t.get('pre_score', 0):6.1f} {t.get('rollouts', 0):8.1f} {t.get('learning', 0):6.1f} "
            f"{t.get('post_score', 0):6.1f}  {int(m.get('steps', 0))} ({r.result.get('detail', '').split(';')[0]})"
        )
    return "\n".join(lines)


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


class PathJob(msgspec.Struct, kw_only=True):
    path: str
    job: int
    ok: bool
    wall_s: float
    engine_cpu_s: float  # this process: scoring, the supervisor
    child_cpu_s: float  # the training child (start-up included), as it reports it: the same measure on both paths
    outside_cpu_s: float  # seen from here: cold, reaped children (bubblewrap passes on none of its children's
    # time); warm, the growth of the zygote's process tree (the fork, the namespaces' init, the child)
    train_setup_s: float  # the job's wall time in the child outside rollouts and learning
    isolation: str
    outcome: list[Any]  # pre, post and each step's (reward, loss): the same job and seed must give the same


async def compare_paths(args: argparse.Namespace) -> int:
    """``--paths``: the same job ``--jobs`` times on each path of the training child, side by side."""
    from adapters.cpu_trainer import close_zygotes, zygote_for
    from adapters.sandbox import detect_isolation

    family = next(f for f in args.families.split(",") if f)
    paths = [p for p in args.paths.split(",") if p]
    print(f"before: {_load()}", flush=True)
    jobs: list[PathJob] = []
    zygote_start: dict[str, float] = {}

    curve: list[tuple[int | None, float | None, float | None]] = []

    async def quiet(p: Progress) -> None:
        if p.phase == "train":
            curve.append((p.step, p.reward, p.loss))

    with tempfile.TemporaryDirectory(prefix="cpu-paths-") as tmp:
        for path in paths:
            work = Path(tmp) / f"work-{path}"
            trainer = CpuTrainer(
                seed=args.seed,
                threads=args.threads,
                eval_limit=args.eval_limit,
                work_root=work,
                child_path=path,
                score_memo=_NO_MEMO,
            )
            zygote = None
            if path == "warm":
                zygote = zygote_for(detect_isolation(), work, threads=args.threads)
                wall0 = time.monotonic()
                await zygote.ensure()
                pid = zygote.pid()
                assert pid is not None
                zygote_start = {"wall_s": time.monotonic() - wall0, "cpu_s": tree_cpu_seconds(pid)}
                print(f"  warm zygote ready: {zygote_start['wall_s']:.1f} s wall, {zygote_start['cpu_s']:.1f} CPU-s")
            for n in range(1, args.jobs + 1):
                job_dir = Path(tmp) / f"{path}-{n}"
                bundle = write_bundle(job_dir, family, "family-reference", ENVS / "family_reference", args)
                own0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
                tree0 = tree_cpu_seconds(zygote.pid() or 0) if zygote is not None else 0.0
                wall0 = time.monotonic()
                curve.clear()
                result = await trainer.run(bundle, quiet)
                wall = time.monotonic() - wall0
                await asyncio.sleep(0.6)  # the zygote reaps a finished child within 0.25 s
                own1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
                engine = own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime
                outside = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
                if zygote is not None:
                    outside += tree_cpu_seconds(zygote.pid() or 0) - tree0
                child = float(result.timings.get("train_cpu", 0.0))
                line = next((x for x in result.detail.split("; ") if x.startswith("training isolation:")), "")
                job = PathJob(
                    path=path,
                    job=n,
                    ok=result.ok,
                    wall_s=round(wall, 2),
                    engine_cpu_s=round(engine, 2),
                    child_cpu_s=round(child, 2),
                    outside_cpu_s=round(outside, 2),
                    train_setup_s=float(result.timings.get("train_setup", 0.0)),
                    isolation=line.split(", ")[-1] if line else result.detail[:120],
                    outcome=[result.pre, result.post, list(curve)],
                )
                jobs.append(job)
                print(
                    f"  {path} job {n}: ok={job.ok} wall {job.wall_s:.1f} s, CPU engine {job.engine_cpu_s:.1f} s "
                    f"+ child {job.child_cpu_s:.1f} s (outside view {job.outside_cpu_s:.1f} s); {job.isolation[:50]}",
                    flush=True,
                )
        close_zygotes()
    print(f"after: {_load()}")
    print()
    head = f"{'path':<5} {'job':>3} {'wall s':>7} {'engine CPU-s':>12} {'child CPU-s':>11} {'job CPU-s':>9}"
    head += f" {'outside view':>12} {'train setup s':>13}"
    print(head)
    print("-" * len(head))
    for j in jobs:
        print(
            f"{j.path:<5} {j.job:>3} {j.wall_s:7.1f} {j.engine_cpu_s:12.1f} {j.child_cpu_s:11.1f} "
            f"{j.engine_cpu_s + j.child_cpu_s:9.1f} {j.outside_cpu_s:12.1f} {j.train_setup_s:13.1f}"
        )
    if zygote_start:
        print(
            f"warm zygote start-up (once per pod agent): {zygote_start['wall_s']:.1f} s wall, "
            f"{zygote_start['cpu_s']:.1f} CPU-s"
        )

    def mean(path: str, key: str) -> float:
        vals = [getattr(j, key) for j in jobs if j.path == path and j.job > 1] or [
            getattr(j, key) for j in jobs if j.path == path
        ]
        return sum(vals) / len(vals)

    if {"cold", "warm"} <= set(paths):
        for key, what in (("child_cpu_s", "child CPU-s"), ("wall_s", "wall s")):
            c, w = mean("cold", key), mean("warm", key)
            print(f"per job (jobs 2..{args.jobs}), {what}: cold {c:.1f}, warm {w:.1f}, warm/cold {w / c:.2f}")
        pairs = [(c, w) for c in jobs for w in jobs if (c.path, w.path) == ("cold", "warm") and c.job == w.job]
        same = all(c.outcome == w.outcome for c, w in pairs)
        print(
            f"same job, same seed on both paths: {'identical' if same else 'DIFFERENT'} pre, post, step rewards, losses"
        )
        saved = mean("cold", "child_cpu_s") - mean("warm", "child_cpu_s")
        if saved > 0 and zygote_start:
            print(f"the zygote's start-up is paid back after {zygote_start['cpu_s'] / saved:.1f} jobs (CPU)")
    if args.json is not None:
        out = {"jobs": [msgspec.to_builtins(j) for j in jobs], "zygote_start": zygote_start}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if all(j.ok for j in jobs) else 1


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default="calc_chain,string_pipeline,ledger")
    parser.add_argument("--model", default="tiny-0.6b")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-5, help="the job's learning rate (x10 for the tiny model)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--kl", type=float, default=0.0)
    parser.add_argument("--spec", choices=("fast", "full"), default="full", help="task spec whose bounds/budget apply")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-limit", type=int, default=None, help="hidden tasks per score (default: all 200)")
    parser.add_argument("--no-bad", action="store_true", help="skip the reward-everything env run")
    parser.add_argument("--no-repeat", action="store_true", help="skip the same-seed repeat")
    parser.add_argument("--json", type=Path, default=None, help="write every run's result here")
    parser.add_argument("--paths", default="", help="compare the training child's paths instead, e.g. cold,warm")
    parser.add_argument("--jobs", type=int, default=3, help="with --paths: jobs per path")
    args = parser.parse_args(argv)
    if args.paths:
        return await compare_paths(args)

    families = [f for f in args.families.split(",") if f]
    runs: list[Run] = []
    for family in families:
        runs.append(await run_job(f"{family} / reference", family, "family-reference", ENVS / "family_reference", args))
    if not args.no_bad:
        first = families[0]
        runs.append(
            await run_job(f"{first} / reward-everything", first, "reward-everything", ENVS / "reward_everything", args)
        )
    if not args.no_repeat:
        first = families[0]
        runs.append(
            await run_job(f"{first} / reference (repeat)", first, "family-reference", ENVS / "family_reference", args)
        )

    print()
    print(
        f"CPU inner job: model {args.model}, seed {args.seed}, {args.steps} steps x {args.batch} rollouts "
        f"(group {args.group}), job lr {args.lr:g}, {args.threads} torch thread(s)"
    )
    print(table(runs))
    if not args.no_repeat:
        a, b = runs[0], runs[-1]
        same = (a.result.get("pre"), a.result.get("post"), a.steps) == (
            b.result.get("pre"),
            b.result.get("post"),
            b.steps,
        )
        print(f"repeat with seed {args.seed}: {'identical' if same else 'DIFFERENT'} pre/post/step rewards")
    if args.json is not None:
        args.json.write_text(json.dumps([msgspec.to_builtins(r) for r in runs], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
