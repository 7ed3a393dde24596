"""``ait report``: a Markdown report of a run with PNG plots and CSV tables.

:func:`write_report` reads ``runs/<run>/events.jsonl`` (and the job bundles in ``blobs/``) and writes, into the
output directory: ``report.md``, the plots of :data:`.plots.PLOTS`, ``steps.csv`` and ``jobs.csv`` (and, for a
CPU replica run, ``choices.csv``).

- :mod:`.accounts`: a projection of per-attempt pod time, spend per episode and step, and sampler paths;
- :mod:`.jobtoml`: the agent's choices (base model, adopted ``[prime_rl]`` keys) from a job bundle;
- :mod:`.data`: the report's numbers as plain data;
- :mod:`.replica`, :mod:`.replica_md`: the CPU replica's choices per step, first vs last steps, holdout arms;
- :mod:`.plots`: the figures (matplotlib, Agg);
- :mod:`.markdown`: the text and CSVs.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from rich.console import Console

from engine.progress import progress
from views.report.accounts import AccountsProjection
from views.report.curves import JobCurvesProjection
from views.report.data import ReportData, collect
from views.watch.folder import RunFolder

__all__ = ["ReportFiles", "write_report"]


class ReportFiles(msgspec.Struct, frozen=True, kw_only=True):
    markdown: Path
    plots: list[Path]
    csvs: list[Path]
    data: ReportData


def write_report(
    run_dir: Path | str, out: Path | str, *, console: Console | None = None, grid: Path | None = None
) -> ReportFiles:
    """Write the report of the run at ``run_dir`` into ``out`` (created if needed); ``grid``: the CPU replica's
    grid JSON (:mod:`.replica`; a given one that does not fit raises ``GridError``)."""
    from views.report.markdown import jobs_csv, markdown, steps_csv
    from views.report.replica import load_grid

    if grid is not None:
        load_grid(grid)  # a grid that does not fit fails before the log is read
    from views.report.plots import plots_for, write_plots  # matplotlib loads only when a report is drawn

    root, dest = Path(run_dir), Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    events = root / "events.jsonl"
    folder = RunFolder(events, extra=[AccountsProjection(), JobCurvesProjection()])
    with progress("reading the log", total=events.stat().st_size, unit="bytes", console=console) as bar:
        while folder.poll(4 << 20):
            bar.update(completed=folder.reader.offset)
    data = collect(root, folder=folder, grid=grid)
    with progress("drawing plots", total=len(plots_for(data)), unit="plots", console=console) as bar:
        plots = write_plots(data, dest, on_done=lambda _name: bar.advance())
    md = dest / "report.md"
    md.write_text(markdown(data, [p.name for p in plots]), encoding="utf-8")
    csvs = [dest / "steps.csv", dest / "jobs.csv"]
    csvs[0].write_text(steps_csv(data), encoding="utf-8")
    csvs[1].write_text(jobs_csv(data), encoding="utf-8")
    if data.replica is not None:
        from views.report.replica_md import choice_share_csv

        csvs.append(dest / "choices.csv")
        csvs[-1].write_text(choice_share_csv(data.replica), encoding="utf-8")
    return ReportFiles(markdown=md, plots=plots, csvs=csvs, data=data)
