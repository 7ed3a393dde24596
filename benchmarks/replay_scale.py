"""Does ``ait replay`` cost more per event on a longer log? CPU us per event at two log lengths, side by side.

    .venv/bin/python benchmarks/replay_scale.py [--events 100000,1000000] [--repeat 5]

The folds' states grow with the log (log_bench's stream: a job per 8 events, kept by several projections), so if
their cache misses were what separates ``ait replay`` from the raw floor in CPU seconds, the replay's cost per
event would rise with the log's length while the floor's (which keeps nothing) stays flat. Each figure is the best
of ``--repeat`` fresh processes, the sizes and steps interleaved: the raw floor (``msgspec.json.decode`` of every
line, untyped, results discarded) and ``engine.replay.replay`` with the default projections (imports excluded).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.log_bench import write_replay_file
from benchmarks.replay_instr import FLOOR, PRELUDE, REPLAY, STEPS

ROOT = Path(__file__).resolve().parents[1]
# The same two steps as benchmarks/replay_instr.py counts in instructions, here timed in CPU seconds.
_STEPS = {"raw decode (floor)": STEPS[FLOOR], "ait replay": STEPS[REPLAY]}


def fresh_process(code: str, log: Path, root: Path = ROOT) -> tuple[float, str]:
    """CPU seconds of ``code`` in a fresh process importing the packages from ``root`` (imports excluded), on
    ``log``, and what it wrote to stderr."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{PRELUDE}import gc, time\ngc.collect()\ncpu = time.process_time()\n{code}\n"
            "print(time.process_time() - cpu)",
            str(log),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,  # ``python -c`` puts the working directory first on sys.path
    )
    return float(out.stdout.split()[-1]), out.stderr.strip()


def cpu_seconds(code: str, log: Path) -> float:
    """CPU seconds of ``code`` in a fresh process (imports excluded), on ``log``."""
    return fresh_process(code, log)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default="100000,1000000", help="log lengths (comma-separated)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sizes = [int(n) for n in args.events.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="replay-scale-"))
    try:
        logs = {n: tmp / f"{n}.jsonl" for n in sizes}
        for n, log in logs.items():
            write_replay_file(log, n)
        best: dict[tuple[str, int], float] = {}
        for _ in range(args.repeat):
            for n, log in logs.items():
                for name, code in _STEPS.items():
                    us = cpu_seconds(code, log) / n * 1e6
                    best[name, n] = min(best.get((name, n), us), us)
        print(f"CPU us per event, best of {args.repeat} fresh processes (log_bench's stream)")
        print(f"  {'':20s}" + "".join(f"{n:>12,}" for n in sizes) + f"{'longest / shortest':>22s}")
        for name in _STEPS:
            row = [best[name, n] for n in sizes]
            print(f"  {name:20s}" + "".join(f"{v:12.2f}" for v in row) + f"{row[-1] / row[0]:22.2f}")
        ratios = [best["raw decode (floor)", n] / best["ait replay", n] for n in sizes]
        print(f"  {'floor / ait replay':20s}" + "".join(f"{r:12.2f}" for r in ratios))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
