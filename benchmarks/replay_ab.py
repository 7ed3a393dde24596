"""``ait replay`` in CPU seconds, this checkout against another, in rounds that cancel the host's drift.

    .venv/bin/python benchmarks/replay_ab.py --before-root /tmp/before [--events 1000000] [--rounds 9] [--lifecycle]

On a shared machine the speed of the same code moves by 20 % or more within minutes (docs/performance.md), more
than a change to the fold moves it. Each round runs four fresh processes back to back: the raw floor
(``msgspec.json.decode`` of every line, untyped), ``engine.replay.replay`` with the default projections from this
checkout, the same from ``--before-root``, and the floor again (imports excluded from each, as
``benchmarks/replay_scale.py`` times them). Each replay is set against the mean of its round's two floors, and
the two checkouts against each other within the round; the medians over the rounds are printed, with the best of
each step. The instruction count (``benchmarks/replay_instr.py``) is the figure the host does not move.
``--lifecycle`` replays ``log_bench.lifecycle_body``'s stream (pods come up, each job runs on one) instead of the
issue's.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.log_bench import body, lifecycle_body, write_replay_file
from benchmarks.replay_instr import FLOOR, REPLAY, STEPS
from benchmarks.replay_scale import fresh_process


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-root", type=Path, required=True, help="a checkout of the code before a change")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--lifecycle", action="store_true", help="log_bench.lifecycle_body's stream, not the issue's")
    args = ap.parse_args()
    before = args.before_root.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="replay-ab-"))
    try:
        log = tmp / "log.jsonl"
        write_replay_file(log, args.events, lifecycle_body if args.lifecycle else body)
        rows: list[tuple[float, float, float]] = []  # (mean floor, this checkout, before)
        kind = "lifecycle stream" if args.lifecycle else "log_bench stream"
        print(f"{args.events:,} events ({kind}), CPU s per fresh process (imports excluded)")
        for i in range(args.rounds):
            first = fresh_process(STEPS[FLOOR], log)[0]
            after = fresh_process(STEPS[REPLAY], log)[0]
            was = fresh_process(STEPS[REPLAY], log, before)[0]
            floor = (first + fresh_process(STEPS[FLOOR], log)[0]) / 2
            rows.append((floor, after, was))
            print(
                f"  round {i + 1}: floor {floor:.2f}   this checkout {after:.2f} ({floor / after:.3f})"
                f"   --before-root {was:.2f} ({floor / was:.3f})",
                flush=True,
            )
        med = statistics.median
        print(
            f"median floor / replay: this checkout {med(f / a for f, a, _ in rows):.3f}, "
            f"--before-root {med(f / b for f, _, b in rows):.3f}   (target >= 0.6)"
        )
        print(f"median this checkout / --before-root, within a round: {med(a / b for _, a, b in rows):.3f}")
        print(
            f"best: floor {min(f for f, _, _ in rows):.2f}, this checkout {min(a for _, a, _ in rows):.2f}, "
            f"--before-root {min(b for _, _, b in rows):.2f}"
        )
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
