"""Validation probe benchmark: wall time per submission of a good env, p50 over several runs.

Each run is one full ``ProbeValidator.validate`` of ``tests/adapters/probe/workspaces/good_calc`` against
``examples/tasks/calc_chain_v1_fast.json``: parse and static checks, a fresh sandbox (bubblewrap where
available), the verifiers import inside it, the env import, task loading and the hidden-eval comparison,
the tool listing, the gold/wrong rubric rollouts and the prime-rl mapping. Runs are sequential, so the
figures are per submission on an otherwise idle probe.

    .venv/bin/python benchmarks/probe_bench.py [--runs 5] [--isolation auto|bwrap|unshare|none] [--json out.json]

Prints one line per run (total and the sandbox start-up) and a summary (p50, min, max).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.probe import ProbeValidator  # noqa: E402
from families.spec import load_spec  # noqa: E402

WORKSPACE = ROOT / "tests" / "adapters" / "probe" / "workspaces" / "good_calc"
SPEC = ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json"


async def _main(args: argparse.Namespace) -> dict[str, object]:
    spec = load_spec(SPEC)
    validator = ProbeValidator(isolation=args.isolation)
    totals: list[float] = []
    startups: list[float] = []
    isolation = ""
    for i in range(args.runs):
        started = time.monotonic()
        report = await validator.validate(WORKSPACE, spec, 1)
        total = time.monotonic() - started
        if not report.ok:
            raise SystemExit(f"run {i}: the good env did not validate: {[c for c in report.checks if not c.ok]}")
        env_import = next(c for c in report.checks if c.name == "env_import")
        match = re.search(r"sandbox start-up ([\d.]+) s", env_import.detail)
        startup = float(match.group(1)) if match else float("nan")
        totals.append(total)
        startups.append(startup)
        isolation = report.isolation
        print(f"run {i}: {total:.2f} s (sandbox start-up incl. verifiers import {startup:.2f} s)")
    summary = {
        "runs": args.runs,
        "p50_s": statistics.median(totals),
        "min_s": min(totals),
        "max_s": max(totals),
        "startup_p50_s": statistics.median(startups),
        "isolation": isolation,
    }
    print(
        f"validation per submission: p50 {summary['p50_s']:.2f} s (min {summary['min_s']:.2f}, "
        f"max {summary['max_s']:.2f}); sandbox start-up p50 {summary['startup_p50_s']:.2f} s"
    )
    print(f"isolation: {isolation}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--isolation", default="auto", choices=("auto", "bwrap", "unshare", "none"))
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args()
    summary = asyncio.run(_main(args))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
