"""``ait --help`` start-up against a bare interpreter start, side by side, in one run.

Each command is started ``--repeat`` times as a fresh process (interleaved, so load drifts hit all alike); the
best wall and CPU seconds (the process and its children) are printed with their ratio to ``python -c pass``,
together with the heavy stacks each one imported (none is the target for help and the light subcommands).

    .venv/bin/python benchmarks/cli_start.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "verifiers", "matplotlib", "tinker", "peft", "huggingface_hub")
# The entry point as the console script runs it, plus a report of the heavy modules it left imported.
PROBE = (
    "import sys, cli\n"
    "try:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    f"sys.stderr.write('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules) + chr(10))\n"
)
COMMANDS: dict[str, list[str]] = {
    "python -c pass (bare interpreter)": ["-c", "pass"],
    "ait --help": ["-c", PROBE, "--help"],
    "ait replay --help": ["-c", PROBE, "replay", "--help"],
    "ait watch --help": ["-c", PROBE, "watch", "--help"],
    "ait episode --help": ["-c", PROBE, "episode", "--help"],
}


def _run(args: list[str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    heavy = next((line[6:] for line in done.stderr.splitlines() if line.startswith("HEAVY=")), "")
    return wall, cpu, heavy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    best: dict[str, tuple[float, float, str]] = {}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            wall, cpu, heavy = _run(argv)
            old = best.get(name)
            best[name] = (min(wall, old[0]) if old else wall, min(cpu, old[1]) if old else cpu, heavy)
    base_wall, base_cpu, _ = best["python -c pass (bare interpreter)"]
    print(f"best of {args.repeat}, load average {os.getloadavg()[0]:.1f} at the end")
    print("| command | wall s | CPU s | wall / bare | heavy stacks imported |\n|---|---:|---:|---:|---|")
    for name, (wall, cpu, heavy) in best.items():
        print(f"| `{name}` | {wall:.3f} | {cpu:.3f} | {wall / base_wall:.1f}x | {heavy or 'none'} |")
    print(f"(bare CPU {base_cpu:.3f} s)")


if __name__ == "__main__":
    main()
