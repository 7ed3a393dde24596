"""Start-up of a run from its snapshot: a 1M-event run against a 100k-event one, for the Runtime, ``ait resume``,
``ait watch`` and ``ait report``.

    .venv/bin/python -m benchmarks.startup_bench                 # 100k and 1M events, 1,000-event tail
    .venv/bin/python -m benchmarks.startup_bench --sizes 20000,200000 --no-process

For each size: a run directory whose log holds ``--jobs`` jobs, each queued, started, reporting progress (most
of the events, as a job's step stream does), settling its cost and succeeding; a snapshot written by the
runtime near its end (with the dashboard's and the report's views, as ``ait train`` writes it), then
``--tail`` more events. A larger run has more progress per job, not more jobs: the state (and so the snapshot)
stays the same size. With ``--jobs 0`` every 8 events make a new job (the log_bench stream): the state grows
with the log, and start-up from the snapshot with the state. Timed (CPU, best of ``--repeat``), each from the
snapshot (after) and as before this change (the whole log read):

- ``Runtime(run, default_projections())``: recover the log, load the snapshot, fold the tail (what ``ait resume``,
  a worker and ``ait episode`` do first); before: with the snapshot removed;
- ``ait resume``'s reads before its loop: the run header, the Runtime, the cost ledger's catch-up (a ledger that
  already holds every settlement), the rewarder's catch-up and the reopened episodes' histories; before: each
  of the three read the whole log (``read_log``), as ``run_resume``, ``open_run`` and ``train`` did;
- ``ait watch``: :class:`views.watch.folder.RunFolder` caught up (``snapshot=False``: the whole log);
- ``ait report``: its data (``views.report.data.collect``), without the plots;
- the whole ``ait watch RUN --once`` process, with the snapshot and with it moved away (unless ``--no-process``).

Target: the large run's start-up within 1.2x of the small one's.
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from benchmarks.log_bench import body, write_replay_file
from engine.clock import ManualClock
from engine.log import read_log
from engine.pick import first_record
from engine.runtime import Runtime
from engine.snapshot import SNAPSHOT_NAME
from events import CostSettled, EventBody, JobProgressed, JobQueued, JobStarted, JobSucceeded, Recorded
from events.codec import RecordCodec
from handlers.budget.costs_ledger import CostsLedger, rows_from_log
from handlers.budget.rules import BudgetProjection
from handlers.episode.resume import episode_histories
from handlers.registry import default_projections
from handlers.reward.reactor import RewardReactor
from handlers.run.resume_reads import sync_ledger
from handlers.run.resume_view import ResumeView, catch_up_records, histories
from views.report.accounts import AccountsProjection
from views.report.curves import JobCurvesProjection
from views.report.data import collect
from views.snapshot import snapshot_views
from views.watch.folder import RunFolder


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
        views = [*snapshot_views(), ResumeView()]  # what `ait train` snapshots
        async with Runtime(directory, default_projections(), clock=clock, durability="none", views=views) as rt:
            await rt.emit(body(n))
            await rt.snapshot()  # anchored at the event just emitted
            for i in range(n + 1, n + 1 + tail):
                await rt.emit(body(i))

    anyio.run(main)


def cpu_of(fn: Callable[[], object]) -> float:
    gc.collect()
    cpu = time.process_time()
    fn()
    return time.process_time() - cpu


def runtime(directory: Path) -> Runtime:
    return Runtime(directory, default_projections(), views=[*snapshot_views(), ResumeView()])


def open_close(directory: Path) -> None:
    runtime(directory).log.close()


def resume_before(directory: Path, ledger: CostsLedger) -> None:
    """What ``ait resume`` read before its loop, as it read it before: the whole log three times."""
    events = directory / "events.jsonl"
    assert read_log(events).records[0]  # train_cmd.run_resume: the header
    rt = runtime(directory)
    try:
        ledger.sync(rt.run_id, read_log(events).records)  # handlers/run/start.py: open_run
        records = read_log(events).records  # cli/train_run.py: the rewarder's catch-up, the histories
        anyio.run(RewardReactor().catch_up, rt, records)
        episode_histories(records, [])
    finally:
        rt.log.close()


def resume_after(directory: Path, ledger: CostsLedger) -> None:
    """What ``ait resume`` reads now: the header line, the ledger only if short (handlers/run/resume_reads.py),
    the rewarder's records and the histories from the resume view (handlers/run/resume_view.py)."""
    events = directory / "events.jsonl"
    assert first_record(events)
    rt = runtime(directory)
    try:
        sync_ledger(ledger, rt.run_id, events, rt.state(BudgetProjection))
        kept = rt.state(ResumeView)
        anyio.run(RewardReactor().catch_up, rt, catch_up_records(kept))
        histories(kept, [])
    finally:
        rt.log.close()


def watch(directory: Path, snapshot: bool) -> None:
    RunFolder(directory / "events.jsonl", snapshot=snapshot).catch_up()


def report(directory: Path, snapshot: bool) -> None:
    folder = RunFolder(directory / "events.jsonl", [AccountsProjection(), JobCurvesProjection()], snapshot=snapshot)
    folder.catch_up()
    collect(directory, folder=folder)


def watch_process(directory: Path) -> float:
    """CPU seconds of a whole ``ait watch RUN --once`` process (interpreter start and imports included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "cli", "watch", str(directory), "--once", "--width", "120"],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parents[1],
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(run: Path, ledger_path: Path, names: list[str], repeat: int) -> dict[str, tuple[float, float]]:
    """(from the snapshot, before) CPU seconds of each start-up in ``names``; the snapshot is best of ``repeat``.
    Before (the whole log read): one run each, long and steady; the Runtime and the whole ``ait watch``
    process with the snapshot moved away."""
    ledger = CostsLedger(ledger_path)
    ledger.append(rows_from_log(run.name, read_log(run / "events.jsonl").records))  # complete: nothing missing
    after: dict[str, Callable[[], float]] = {
        "Runtime open": lambda: cpu_of(lambda: open_close(run)),
        "ait resume's reads": lambda: cpu_of(lambda: resume_after(run, ledger)),
        "ait watch (fold)": lambda: cpu_of(lambda: watch(run, True)),
        "ait report (data)": lambda: cpu_of(lambda: report(run, True)),
        "ait watch --once process": lambda: watch_process(run),
    }
    before: dict[str, Callable[[], float]] = {
        "Runtime open": lambda: cpu_of(lambda: open_close(run)),
        "ait resume's reads": lambda: cpu_of(lambda: resume_before(run, ledger)),
        "ait watch (fold)": lambda: cpu_of(lambda: watch(run, False)),
        "ait report (data)": lambda: cpu_of(lambda: report(run, False)),
        "ait watch --once process": lambda: watch_process(run),
    }
    fast = {k: min(after[k]() for _ in range(repeat)) for k in names}
    snap, aside = run / SNAPSHOT_NAME, run.with_name(run.name + "-snapshot.json")
    slow: dict[str, float] = {}
    for k in names:
        moved = k in ("Runtime open", "ait watch --once process")
        if moved:
            snap.rename(aside)
        try:
            slow[k] = before[k]()
        finally:
            if moved:
                aside.rename(snap)
    return {k: (fast[k], slow[k]) for k in names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="events per run (comma-separated)")
    ap.add_argument("--tail", type=int, default=1000, help="events after the snapshot")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2000, help="jobs in each run (0: a new job every 8 events)")
    ap.add_argument("--no-process", action="store_true", help="skip the whole `ait watch --once` processes")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    names = ["Runtime open", "ait resume's reads", "ait watch (fold)", "ait report (data)"]
    if not args.no_process:
        names.append("ait watch --once process")
    try:
        rows: list[tuple[int, dict[str, tuple[float, float]]]] = []
        for n in (int(s) for s in args.sizes.split(",")):
            run = root / f"run-{n}"
            build(run, n, args.tail, args.jobs)
            rows.append((n, measure(run, root / f"costs-{n}.jsonl", names, args.repeat)))
            shutil.rmtree(run)
        jobs = f"{args.jobs:,} jobs" if args.jobs else "a new job every 8 events"
        print(f"start-up, {jobs}, {args.tail:,}-event tail after the snapshot (CPU s; before: the whole log read)")
        for n, figures in rows:
            print(f"  {n:,} events")
            for k, (fast_s, slow_s) in figures.items():
                print(f"    {k:26s} from the snapshot {fast_s:7.3f} s   before {slow_s:7.2f} s")
        (small_n, small), (large_n, large) = rows[0], rows[-1]
        print(f"  {large_n:,} / {small_n:,} events (target <= 1.2 from the snapshot):")
        for k in names:
            after, before = large[k][0] / small[k][0], large[k][1] / small[k][1]
            print(f"    {k:26s} from the snapshot {after:6.2f}   before {before:6.2f}")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
