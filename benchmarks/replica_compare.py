"""Compare CPU replica runs: learning runs (several seeds) against no-learning control runs (issue 19).

    python benchmarks/replica_compare.py --learn runs/replica-s0 runs/replica-s1 \\
        --control runs/replica-control-s0 [--grid examples/replica/grid.json] [--plot docs/img/replica.png] \\
        [--save examples/replica/runs]

A run is a run directory or a summary JSON that ``--save`` wrote (``<run id>.json``: the run's report data
without its per-job and per-episode detail). Saved summaries let the tables and the plot be redrawn from the
repository after the runs' directories are gone (a real run takes half an hour).

Each run is read the way ``ait report`` reads it (:func:`views.report.data.collect`: the real projections over
the run's log and its job bundles). Per arm, the runs are pooled: the episode rewards of each run's first ``k``
and last ``k`` outer steps (``k = min(5, steps // 2)``, the report's rule) are concatenated, and the rise is the
difference of the pooled means with a percentile-bootstrap 95% interval (resampling episodes; seeded). The
share of the grid's best choices is compared the same way (first ``k`` steps against last ``k``), as a share of
episodes. With control runs, a second table sets the pooled arms side by side: the last ``k`` steps of the
learning arm against the control's (both start from the same policy, so learning within the first ``k`` steps
shows there and not in the rise), the first ``k`` (which should not differ), and the learning arm's rise beyond
the control's (difference in differences, the four sides resampled on their own). Episodes are the unit
throughout: the interval does not include the spread between seeds. Printed as markdown tables; ``--plot`` also
draws reward and best-choice share per step, one line per run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import msgspec  # noqa: E402

from views.report.data import ReportData, collect  # noqa: E402
from views.report.replica import Interval, bootstrap_did, bootstrap_diff, bootstrap_mean  # noqa: E402


def _fmt(i: Interval | None) -> str:
    return "-" if i is None else f"{i.mean:+.3f} [{i.low:+.3f}, {i.high:+.3f}] (n={i.n})"


def _best_flags(d: ReportData, steps: slice) -> list[float]:
    """One value per episode of the chosen steps: 1.0 when its job made one of the grid's best choices."""
    assert d.replica is not None
    flags: list[float] = []
    for s in d.replica.steps[steps]:
        flags += [1.0] * s.best + [0.0] * (s.episodes - s.best)
    return flags


class Pooled(NamedTuple):
    """An arm's episode rewards of its runs' first and last ``k`` steps, concatenated over its runs."""

    first: list[float]
    last: list[float]


def pooled(runs: list[ReportData]) -> Pooled:
    first: list[float] = []
    last: list[float] = []
    for d in runs:
        if d.replica is not None and d.replica.k:
            first += d.replica.first_rewards
            last += d.replica.last_rewards
    return Pooled(first, last)


def against_control(learn: Pooled, control: Pooled) -> list[str]:
    """The learning arm against the control: the last steps side by side (the arms start from the same policy, so
    learning that happens within the first ``k`` steps shows here and not in the rise), and the rise beyond the
    control's (difference in differences)."""
    if not (learn.first and learn.last and control.first and control.last):
        return []
    return [
        f"| last k steps: learn - control | {_fmt(bootstrap_diff(control.last, learn.last))} |",
        f"| first k steps: learn - control | {_fmt(bootstrap_diff(control.first, learn.first))} |",
        "| rise: learn - control (difference in differences) | "
        f"{_fmt(bootstrap_did(control.first, control.last, learn.first, learn.last))} |",
    ]


def arm_summary(name: str, runs: list[ReportData]) -> list[str]:
    best_first: list[float] = []
    best_last: list[float] = []
    rows = []
    for d in runs:
        r = d.replica
        if r is None or not r.k:
            rows.append(f"| {name} | {d.run_id} | {len(d.steps)} steps: too few for a comparison | | | |")
            continue
        bf, bl = _best_flags(d, slice(0, r.k)), _best_flags(d, slice(-r.k, None))
        best_first += bf
        best_last += bl
        rows.append(
            f"| {name} | {d.run_id} (seed {d.seed}, {len(d.steps)} steps, k={r.k}) | "
            f"{_fmt(bootstrap_mean(r.first_rewards))} | {_fmt(bootstrap_mean(r.last_rewards))} | "
            f"{_fmt(bootstrap_diff(r.first_rewards, r.last_rewards))} | "
            f"{sum(bf) / max(1, len(bf)):.2f} -> {sum(bl) / max(1, len(bl)):.2f} |"
        )
    first, last = pooled(runs)
    if first and last:
        rows.append(
            f"| **{name}, pooled** | {len(runs)} run(s) | {_fmt(bootstrap_mean(first))} | "
            f"{_fmt(bootstrap_mean(last))} | "
            f"**{_fmt(bootstrap_diff(first, last))}** | "
            f"{_fmt(bootstrap_diff(best_first, best_last))} |"
        )
    return rows


def plot(learn: list[ReportData], control: list[ReportData], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_r, ax_b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for runs, style, arm in ((learn, "-", "learn"), (control, "--", "control")):
        for d in runs:
            steps = [s.step for s in d.steps]
            ax_r.plot(steps, [s.reward for s in d.steps], style, marker="o", ms=3, label=f"{arm} {d.run_id}")
            if d.replica is not None:
                shares = [s.best / s.episodes if s.episodes else 0.0 for s in d.replica.steps]
                ax_b.plot([s.step for s in d.replica.steps], shares, style, marker="o", ms=3, label=f"{arm} {d.run_id}")
    ax_r.set(xlabel="outer step", ylabel="mean episode reward", title="reward per outer step")
    ax_b.set(xlabel="outer step", ylabel="share of episodes", title="share of the grid's best choices", ylim=(0, 1))
    for ax in (ax_r, ax_b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def load(path: Path, grid: Path | None) -> ReportData:
    """A run directory (read as ``ait report`` reads it) or a summary JSON that ``--save`` wrote."""
    if path.is_dir():
        return collect(path, grid=grid)
    try:
        return msgspec.json.decode(path.read_bytes(), type=ReportData)
    except (OSError, msgspec.DecodeError) as exc:
        raise SystemExit(f"replica_compare: {path}: neither a run directory nor a saved run summary: {exc}") from None


def save(d: ReportData, folder: Path) -> Path:
    """Write the run's summary (what the tables and the plot read; no per-job or per-episode detail)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{d.run_id}.json"
    slim = msgspec.structs.replace(d, jobs=[], scored=[], episodes=[], job_trees=[])
    grid = slim.replica.grid if slim.replica is not None else None
    if grid is not None and Path(grid.source).is_relative_to(REPO):  # no machine path in a committed summary
        relative = msgspec.structs.replace(grid, source=str(Path(grid.source).relative_to(REPO)))
        slim = msgspec.structs.replace(slim, replica=msgspec.structs.replace(slim.replica, grid=relative))
    path.write_bytes(msgspec.json.format(msgspec.json.encode(slim), indent=1) + b"\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--learn", nargs="+", type=Path, required=True, help="the learning arm's runs (dirs or summaries)")
    p.add_argument("--control", nargs="*", type=Path, default=[], help="the no-learning arm's runs (dirs or summaries)")
    p.add_argument("--grid", type=Path, default=None, help="the grid JSON (default examples/replica/grid.json)")
    p.add_argument("--plot", type=Path, default=None, help="write reward and best-share per step here (PNG)")
    p.add_argument("--save", type=Path, default=None, help="write each run's summary JSON into this folder")
    args = p.parse_args(argv)
    learn = [load(r, args.grid) for r in args.learn]
    control = [load(r, args.grid) for r in args.control]
    for d in (*learn, *control):
        if d.replica is None:
            sys.stderr.write(f"replica_compare: {d.run_id}: no replica choices in this run\n")
            return 2
        if d.replica.grid_mismatch:  # the best-choice shares below are then against other hidden tasks' grid
            sys.stderr.write(f"replica_compare: {d.run_id}: careful, {d.replica.grid_mismatch}\n")
    print("| arm | run | reward, first k steps | reward, last k steps | rise (last - first) | best-choice share |")
    print("|---|---|---|---|---|---|")
    for line in arm_summary("learn", learn) + arm_summary("control", control):
        print(line)
    if rows := against_control(pooled(learn), pooled(control)):
        print("\n| learn against control, pooled (episodes as the unit) | mean [95% CI] (n) |\n|---|---|")
        for line in rows:
            print(line)
    if args.plot is not None:
        plot(learn, control, args.plot)
        print(f"\nplot: {args.plot}")
    if args.save is not None:
        for d in (*learn, *control):
            print(f"saved: {save(d, args.save)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
