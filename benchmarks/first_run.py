"""A new user's first run: the README's main command in a fresh home, then again, with the wall split by phase.

Runs ``ait episode --task examples/tasks/calc_chain_v1_fast.json`` as a subprocess with ``HOME`` set to a new
empty directory (so no eval key and no frozen baselines: the first run creates the key and freezes the CPU
baselines, exactly as on a new machine), then a second time in the same home (baselines frozen). For each run
it prints the wall seconds, the CPU seconds of the command and everything it started (pod agent, training
child), and the phases, from the console's own timestamps and the run's log:

- ``start+baselines``: process start to the run's first event (imports, the first-use baseline freeze);
- ``episode``: the agent's turns and the sandboxed validation probe, to ``job.queued``;
- ``pod``: the local pod agent starting, to ``job.started``;
- ``pre-score``, ``train``, ``post-score``: the job's phases as the pod agent streamed them;
- ``reward``: the job's result to ``reward.computed`` and the end of the process.

    .venv/bin/python benchmarks/first_run.py [--task examples/tasks/calc_chain_v1_fast.json] [--runs 2]
        [--keep DIR] [--json out.json] [--no-score-memo]

``--no-score-memo`` turns the machine's score memo off (``AIT_SCORE_MEMO_DIR=off``): the pod then scores the
base itself although the first-use freeze just scored it, as before the memo (docs/performance.md).

The machine's load is printed beside the figures: on a shared machine wall times are upper bounds, and the CPU
seconds are the comparable figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PHASES = ("start+baselines", "episode", "pod", "pre-score", "train", "post-score", "reward")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _events(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _first(events: list[dict[str, Any]], kind: str, pred: Any = lambda d: True) -> float | None:
    for e in events:
        if e["type"] == kind and pred(e.get("data", e.get("body", {}))):
            return float(e["ts"])
    return None


def phases(started: float, ended: float, events: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per phase from the wall clock at process start/end and the log's event timestamps."""
    marks = [
        started,
        float(events[0]["ts"]),
        _first(events, "job.queued"),
        _first(events, "job.started"),
        _first(events, "job.progressed", lambda d: d.get("phase") == "pre_score" and d.get("reward") is not None),
        _first(events, "job.progressed", lambda d: d.get("phase") == "post_score"),
        _first(events, "job.succeeded") or _first(events, "job.failed"),
        ended,
    ]
    out: dict[str, float] = {}
    last = started
    for name, mark in zip(PHASES, marks[1:], strict=True):
        if mark is None:
            out[name] = float("nan")
            continue
        out[name] = round(mark - last, 1)
        last = mark
    return out


def run_once(home: Path, runs: Path, task: str, run_id: str, *, score_memo: bool = True) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIT_", "OPENAI_", "XDG_"))}
    env["HOME"] = str(home)
    if not score_memo:
        env["AIT_SCORE_MEMO_DIR"] = "off"  # every process scores what it needs, as before the memo
    cmd = [str(ROOT / ".venv" / "bin" / "ait"), "--runs-root", str(runs), "episode", "--task", task]
    cmd += ["--run-id", run_id]
    cpu0, started = _children_cpu(), time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    ended, cpu = time.time(), _children_cpu() - cpu0
    events = _events(runs / run_id)
    rewards = [e for e in events if e["type"] == "reward.computed"]
    return {
        "run_id": run_id,
        "exit": proc.returncode,
        "wall_s": round(ended - started, 1),
        "cpu_s": round(cpu, 1),
        "phases": phases(started, ended, events),
        "reward": rewards[-1].get("data", rewards[-1].get("body")) if rewards else None,
        "console": proc.stdout + proc.stderr,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="examples/tasks/calc_chain_v1_fast.json")
    parser.add_argument("--runs", type=int, default=2, help="1: first use only; 2: first use, then again")
    parser.add_argument("--keep", type=Path, default=None, help="use (and keep) this directory as the fresh home")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--no-score-memo", action="store_true", help="AIT_SCORE_MEMO_DIR=off: the pod scores the base it was given"
    )
    args = parser.parse_args()
    home = args.keep or Path(tempfile.mkdtemp(prefix="ait-first-run-"))
    home.mkdir(parents=True, exist_ok=True)
    if any(home.iterdir()):
        sys.stderr.write(f"{home} is not empty: a first run needs a fresh home\n")
        return 2
    load = os.getloadavg()
    results = []
    try:
        for i in range(args.runs):
            label = "first use" if i == 0 else "second run"
            result = run_once(home, home / "runs", args.task, f"first-run-{i}", score_memo=not args.no_score_memo)
            result["label"] = label
            results.append(result)
            print(f"--- {label}: exit {result['exit']}, wall {result['wall_s']} s, CPU {result['cpu_s']} s")
            print(result["console"].rstrip())
    finally:
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)
    print(f"\nload average at start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs")
    header = f"{'run':<11} {'wall s':>7} {'CPU s':>7} " + " ".join(f"{p:>15}" for p in PHASES) + "  reward / uplift (n)"
    print(header)
    for r in results:
        rc = r["reward"] or {}
        uplift = rc.get("uplift")
        tail = f"{rc.get('reward', float('nan')):+.4f} / {uplift:+.3f}" if uplift is not None else "-"
        cells = " ".join(f"{r['phases'][p]:>15}" for p in PHASES)
        print(f"{r['label']:<11} {r['wall_s']:>7} {r['cpu_s']:>7} {cells}  {tail}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
