"""Start-up of a run from its snapshot: opening the Runtime of a 1M-event run against a 100k-event one.

    .venv/bin/python benchmarks/startup_bench.py                 # 100k and 1M events, 1,000-event tail
    .venv/bin/python benchmarks/startup_bench.py --sizes 20000,200000

For each size: a run directory whose log holds ``--jobs`` jobs, each queued, started, reporting progress (most
of the events, as a job's step stream does), settling its cost and succeeding; a snapshot written by the
runtime near its end, then ``--tail`` more events. A larger run has more progress per job, not more jobs: the
state (and so the snapshot) stays the same size. With ``--jobs 0`` every 8 events make a new job (the
log_bench stream): the state grows with the log, and start-up from the snapshot with the state.
Timed (CPU, best of ``--repeat``):
``Runtime(run, default_projections())`` (what ``ait resume`` / a worker does first: recover the log, load the
snapshot, fold the tail) and closing it; then the same with the snapshot removed (the whole log read and
folded), for reference. Target: the large run's start-up within 1.2x of the small one's.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
from pathlib import Path

import anyio

from benchmarks.log_bench import body, write_replay_file
from engine.clock import ManualClock
from engine.runtime import Runtime
from engine.snapshot import SNAPSHOT_NAME
from events import CostSettled, EventBody, JobProgressed, JobQueued, JobStarted, JobSucceeded, Recorded
from events.codec import RecordCodec
from handlers.registry import default_projections


def job_stream(n: int, jobs: int) -> list[EventBody]:
    """``n`` events over ``jobs`` jobs run one after another; the progress events fill the rest."""
    per = n // jobs
    out: list[EventBody] = []
    for j in range(jobs):
        job = f"job-{j:07d}"
        out.append(
            JobQueued(job_id=job, episode_id=f"ep-{j}", family="calc_chain", base_model="tiny", bundle="ab" * 32)
        )
        out.append(JobStarted(job_id=job, pod_id=f"pod-{j % 13}"))
        out.extend(JobProgressed(job_id=job, step=k, reward=0.5, loss=1.5) for k in range(per - 4))
        out.append(CostSettled(reservation_id=f"r-{j}", kind="job", ref=job, usd=0.01, seconds=3.0))
        out.append(JobSucceeded(job_id=job, pre=0.25, post=0.5, train_seconds=30.0))
    return out


def build(directory: Path, n: int, tail: int, jobs: int) -> None:
    directory.mkdir()
    if jobs:
        codec = RecordCodec()
        with (directory / "events.jsonl").open("wb") as f:
            for i, b in enumerate(job_stream(n, jobs)):
                f.write(codec.encode(Recorded(i, 1_764_460_800.0 + i * 0.001, b)))
        n = len(job_stream(n, jobs))
    else:
        write_replay_file(directory / "events.jsonl", n)

    async def main() -> None:
        clock = ManualClock(start=1_764_460_800.0 + n * 0.001, step=0.001)
        async with Runtime(directory, default_projections(), clock=clock, durability="none") as rt:
            await rt.emit(body(n))
            await rt.snapshot()  # anchored at the event just emitted
            for i in range(n + 1, n + 1 + tail):
                await rt.emit(body(i))

    anyio.run(main)


def open_close(directory: Path) -> float:
    gc.collect()
    cpu = time.process_time()
    rt = Runtime(directory, default_projections())
    rt.log.close()
    return time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="events per run (comma-separated)")
    ap.add_argument("--tail", type=int, default=1000, help="events after the snapshot")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2000, help="jobs in each run (0: a new job every 8 events)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    try:
        rows: list[tuple[int, float, float]] = []
        for n in (int(s) for s in args.sizes.split(",")):
            run = root / f"run-{n}"
            build(run, n, args.tail, args.jobs)
            snap = min(open_close(run) for _ in range(args.repeat))
            (run / SNAPSHOT_NAME).unlink()
            full = open_close(run)
            rows.append((n, snap, full))
            shutil.rmtree(run)
        jobs = f"{args.jobs:,} jobs" if args.jobs else "a new job every 8 events"
        print(f"Runtime start-up, default projections, {jobs}, {args.tail:,}-event tail after the snapshot (CPU s)")
        for n, snap, full in rows:
            print(f"  {n:>10,} events: from the snapshot {snap:6.3f} s   whole log (no snapshot) {full:6.2f} s")
        small, large = rows[0], rows[-1]
        print(f"  large / small start-up from the snapshot: {large[1] / small[1]:.2f}  (target <= 1.2)")
        print(f"  large / small start-up reading the whole log: {large[2] / small[2]:.2f}")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
