"""The local pod agent's start-up, this checkout against another (before/after a change), alternating runs.

Starts ``ait pod-agent --trainer cpu`` (the README main job's pod) from each source tree in turn and measures,
until it has written its URL file (it listens), the CPU seconds it spent (user + system, from ``wait4``; it is
killed at once so that nothing after start-up counts) and the wall seconds. Prints the medians and the ratio
this/baseline of the CPU medians: on a shared machine the wall time measures the queue, CPU time the work.

    .venv/bin/python benchmarks/pod_agent_start.py --baseline ../main [--runs 5] [--trainer cpu]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def start_once(tree: Path, trainer: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) from spawn to listening."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "token").write_text("x" * 32)
        url = d / "agent.json"
        argv = [sys.executable, "-m", "cli", "pod-agent", "--token-file", str(d / "token"), "--trainer", trainer]
        argv += ["--url-file", str(url), "--workdir", str(d / "w")]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not url.exists():
            if proc.poll() is not None:
                raise SystemExit(f"the pod agent from {tree} exited with {proc.returncode} before listening")
            time.sleep(0.01)
        wall = time.perf_counter() - t0
        os.kill(proc.pid, signal.SIGKILL)
        _, _, usage = os.wait4(proc.pid, 0)
        return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=True, help="another checkout of this project (the 'before')")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--trainer", default="cpu")
    args = ap.parse_args()
    trees = {"baseline": args.baseline.resolve(), "this": HERE}
    cpu: dict[str, list[float]] = {k: [] for k in trees}
    wall: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():  # alternating: both see the same load over time
            c, w = start_once(tree, args.trainer)
            cpu[name].append(c)
            wall[name].append(w)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs each, trainer {args.trainer}")
    for name in trees:
        print(
            f"{name:>8}: CPU median {statistics.median(cpu[name]):.3f} s (min {min(cpu[name]):.3f}), "
            f"wall median {statistics.median(wall[name]):.1f} s"
        )
    print(
        f"ratio this/baseline (CPU medians): {statistics.median(cpu['this']) / statistics.median(cpu['baseline']):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
