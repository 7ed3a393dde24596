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

Prints one line per step and a summary table (pre, post, uplift, wall seconds and its split).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from handlers.ports.inner_trainer import JobBundle, JobResult, Progress  # noqa: E402

ENVS = ROOT / "fixtures" / "envs"
TASKS = ROOT / "examples" / "tasks"
QWEN = {"tiny-0.6b": "Qwen/Qwen3-0.6B", "tiny-1.7b": "Qwen/Qwen3-1.7B"}


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

    trainer = CpuTrainer(seed=args.seed, threads=args.threads, eval_limit=args.eval_limit, kl_coef=args.kl)
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
    args = parser.parse_args(argv)

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
