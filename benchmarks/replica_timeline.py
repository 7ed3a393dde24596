"""Where a CPU replica run's wall time went: its pods' occupancy, step by step, from the run's own event log.

    python benchmarks/replica_timeline.py RUN_DIR [RUN_DIR ...] [--steps]

For each run (read with the engine's log reader, ``engine.log.read_log``): the wall time from ``run.started`` to
``run.finished``; the sum of its jobs' wall times (assigned to succeeded: the work the pods did); the time with
0, 1 and 2 or more jobs running (with 2 pods on 2 cores, time with one job running is one core idle, and with
none both cores but the agent's and the learner's); the mean and largest wait of a job from queued to assigned;
and, per outer step (``--steps``), its span from ``batch.started`` to ``batch.collected``, the time until its
first job started, and the time its last job ran alone.

The runs compared should have run the same config on the same seed (the same jobs, so the same work): what
differs is the order and the overlap. Wall times move with this machine's speed (docs/performance.md, "This
machine's speed varies with its host"); the job-seconds column says how fast the machine was.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.log import read_log  # noqa: E402
from events import BatchCollected, BatchStarted, JobAssigned, JobQueued, JobSucceeded, RunFinished  # noqa: E402


class Job(NamedTuple):
    queued: float
    assigned: float
    finished: float


class Step(NamedTuple):
    started: float
    collected: float
    first_start: float  # seconds from the step's start to its first job's assignment
    alone: float  # seconds its last job ran with no other job running


class Timeline(NamedTuple):
    wall: float
    job_seconds: float
    running: dict[int, float]  # number of jobs running -> seconds
    waits: list[float]
    steps: list[Step]


def _occupancy(jobs: list[Job], start: float, end: float) -> Counter[int]:
    points = sorted([(j.assigned, 1) for j in jobs] + [(j.finished, -1) for j in jobs])
    out: Counter[int] = Counter()
    running, last = 0, start
    for t, delta in points:
        out[min(running, 2)] += max(0.0, t - last)
        running, last = running + delta, max(last, t)
    out[min(running, 2)] += max(0.0, end - last)
    return out


def timeline(run: Path) -> Timeline:
    records = read_log(run / "events.jsonl").records
    t0 = records[0].ts
    end = next((r.ts for r in reversed(records) if isinstance(r.event, RunFinished)), records[-1].ts) - t0
    queued: dict[str, float] = {}
    assigned: dict[str, float] = {}
    jobs: list[Job] = []
    spans: list[tuple[float, float]] = []
    for r in records:
        e, t = r.event, r.ts - t0
        if isinstance(e, JobQueued):
            queued[e.job_id] = t
        elif isinstance(e, JobAssigned):
            assigned[e.job_id] = t
        elif isinstance(e, JobSucceeded) and e.job_id in assigned:
            jobs.append(Job(queued[e.job_id], assigned[e.job_id], t))
        elif isinstance(e, BatchStarted):
            spans.append((t, end))
        elif isinstance(e, BatchCollected) and spans:
            spans[-1] = (spans[-1][0], t)
    steps = []
    for started, collected in spans:
        mine = [j for j in jobs if started <= j.queued < collected]
        if not mine:
            continue
        last = max(mine, key=lambda j: j.finished)
        others_end = max((j.finished for j in mine if j is not last), default=last.assigned)
        steps.append(
            Step(
                started=started,
                collected=collected,
                first_start=min(j.assigned for j in mine) - started,
                alone=max(0.0, last.finished - max(last.assigned, others_end)),
            )
        )
    return Timeline(
        wall=end,
        job_seconds=sum(j.finished - j.assigned for j in jobs),
        running=dict(_occupancy(jobs, 0.0, end)),
        waits=[j.assigned - j.queued for j in jobs],
        steps=steps,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (each with its events.jsonl)")
    parser.add_argument("--steps", action="store_true", help="also one line per outer step")
    args = parser.parse_args(argv)
    print(
        "| run | wall s | job-seconds | 0 jobs running, s | 1 job, s | 2 jobs, s | "
        "job wait mean / max, s | step: first job after, s (mean) | step: last job alone, s (sum) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines: list[str] = []
    for run in args.runs:
        t = timeline(run)
        wait = f"{sum(t.waits) / len(t.waits):.1f} / {max(t.waits):.1f}" if t.waits else "-"
        first = sum(s.first_start for s in t.steps) / len(t.steps) if t.steps else 0.0
        print(
            f"| {run.name} | {t.wall:.0f} | {t.job_seconds:.0f} | {t.running.get(0, 0.0):.0f} | "
            f"{t.running.get(1, 0.0):.0f} | {t.running.get(2, 0.0):.0f} | {wait} | {first:.1f} | "
            f"{sum(s.alone for s in t.steps):.0f} |"
        )
        for i, s in enumerate(t.steps):
            lines.append(
                f"{run.name} step {i + 1:2d}: {s.collected - s.started:6.1f} s, first job after {s.first_start:5.1f} s,"
                f" last job alone {s.alone:5.1f} s"
            )
    if args.steps:
        print("\n".join(["", *lines]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
