"""``ait report`` on the golden run: every file is written, the plots are real images, and the numbers in the
Markdown are the log's (computed here from raw events, see tests/golden/facts.py)."""

from __future__ import annotations

import contextlib
import csv
import io
import re
import tarfile
import tomllib
from pathlib import Path

import pytest

from cli import main
from engine.blobs import BlobStore
from engine.clock import ManualClock
from engine.runtime import Runtime
from events import (
    CostSettled,
    EpisodeFinished,
    EpisodeStarted,
    JobFailed,
    JobQueued,
    JobSucceeded,
    RunFinished,
    RunStarted,
)
from tests.golden.facts import (
    GOLDEN_EVENTS,
    golden_records,
    holdout_arms,
    mean,
    of_type,
    rewards_by_episode,
    step_episodes,
)
from tests.golden.make_run_log import ADOPTABLE
from views.report import write_report

GOLDEN = GOLDEN_EVENTS.parent
# ``views.report.plots.PLOTS`` by name, for parametrize: that module loads matplotlib, which collection must not
# (issue 18). test_every_file_is_written checks the two agree.
PLOT_NAMES = (
    "reward_per_step.png",
    "rates.png",
    "scores.png",
    "model_share.png",
    "prime_rl_adoption.png",
    "costs.png",
)


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``ait report GOLDEN --out DIR`` once for the module: (DIR, what it printed)."""
    out = tmp_path_factory.mktemp("report")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["report", str(GOLDEN), "--out", str(out)]) == 0
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def report(cli_run: tuple[Path, str]) -> Path:
    return cli_run[0]


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _rows(section: str) -> list[list[str]]:
    """The cells of every body row of the Markdown tables in ``section``."""
    lines = section.splitlines()
    rows = []
    for i, line in enumerate(lines):
        separator = re.fullmatch(r"\|( -+:? \|)+", line) is not None
        header = i + 1 < len(lines) and re.fullmatch(r"\|( -+:? \|)+", lines[i + 1]) is not None
        if line.startswith("| ") and not separator and not header:
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_every_file_is_written(report: Path) -> None:
    from views.report.plots import PLOTS

    assert tuple(PLOTS) == PLOT_NAMES
    names = {p.name for p in report.iterdir()}
    assert {"report.md", "steps.csv", "jobs.csv", *PLOTS} <= names
    md = (report / "report.md").read_text()
    for plot in PLOTS:
        assert f"]({plot})" in md, plot


@pytest.mark.parametrize("name", sorted(PLOT_NAMES))
def test_plots_are_non_trivial_images(report: Path, name: str) -> None:
    from matplotlib.image import imread

    data = (report / name).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000, "a real figure with text and marks, not an empty canvas"
    pixels = imread(report / name)
    height, width = pixels.shape[:2]
    assert width >= 900 and height >= 500
    ink = (pixels[..., :3].mean(axis=2) < 0.9).mean()  # share of non-white pixels
    assert 0.03 < ink < 0.8, ink
    assert pixels[..., :3].std() > 0.1


def test_reward_table_matches_the_log(report: Path) -> None:
    records = golden_records()
    rewards = rewards_by_episode(records)
    rows = {int(r[0]): r for r in _rows(_section((report / "report.md").read_text(), "Reward per outer step"))}
    steps = step_episodes(records)
    assert sorted(rows) == sorted(steps)
    ended = {e.job_id: "ok" for e in of_type(records, JobSucceeded)} | {
        e.job_id: "failed" for e in of_type(records, JobFailed)
    }
    for step, ids in steps.items():
        rs = [rewards[e] for e in ids]
        _, n, reward, validation, quality, speed, penalty, validated, jobs = rows[step]
        assert int(n) == len(ids)
        assert float(reward) == pytest.approx(mean([r.reward for r in rs]), abs=6e-4)
        assert float(validation) == pytest.approx(mean([r.w_validation * r.validation for r in rs]), abs=6e-4)
        assert float(quality) == pytest.approx(mean([r.w_quality * r.quality for r in rs]), abs=6e-4)
        assert float(speed) == pytest.approx(mean([r.w_speed * r.speed for r in rs]), abs=6e-4)
        no_sub = [r.reward for r in rs if not r.parseable]
        assert float(penalty) == pytest.approx(sum(no_sub) / len(rs), abs=6e-4)
        assert validated.startswith(f"{sum(r.validated for r in rs)}/{len(ids)} ")
        step_jobs = [r.job_id for r in rs if r.job_id in ended]
        ok = sum(1 for j in step_jobs if ended[j] == "ok")
        assert jobs.startswith(f"{ok}/{len(step_jobs)} ")


def test_model_selection_table_matches_the_log(report: Path) -> None:
    records = golden_records()
    steps = step_episodes(records)
    queued = {e.episode_id: e.base_model for e in of_type(records, JobQueued)}
    section = _section((report / "report.md").read_text(), "Model selection")
    header = next(line for line in section.splitlines() if line.startswith("| step"))
    models = [c.strip() for c in header.strip("|").split("|")][2:]
    for row in _rows(section):
        step = int(row[0])
        chosen = [queued[e] for e in steps[step] if e in queued]
        assert int(row[1]) == len(chosen)
        for model, cell in zip(models, row[2:], strict=True):
            assert cell.startswith(f"{chosen.count(model)}/{len(chosen)} ")


def test_adoption_table_matches_the_bundles(report: Path) -> None:
    """Oracle: the generator only ever writes adopted keys with values from ADOPTABLE, never a default."""
    records = golden_records()
    blobs = BlobStore(GOLDEN / "blobs")
    steps = step_episodes(records)
    adopters: dict[str, bool] = {}
    for e in of_type(records, JobQueued):
        with tarfile.open(fileobj=io.BytesIO(blobs.get(e.bundle))) as tar:
            member = tar.extractfile("job.toml")
            assert member is not None
            table = tomllib.loads(member.read().decode())["prime_rl"]
        adopters[e.episode_id] = any(k in ADOPTABLE and v in ADOPTABLE[k] for k, v in table.items())
    assert "A CPU replica run" not in _section((report / "report.md").read_text(), "[prime_rl] key adoption")
    for row in _rows(_section((report / "report.md").read_text(), "[prime_rl] key adoption")):
        jobs = [e for e in steps[int(row[0])] if e in adopters]
        assert int(row[1]) == len(jobs)
        assert row[2].startswith(f"{sum(adopters[e] for e in jobs)}/{len(jobs)} ")


def test_holdout_table_matches_the_log(report: Path) -> None:
    arms = holdout_arms(golden_records())
    rows = _rows(_section((report / "report.md").read_text(), "Holdout"))
    assert len(rows) == len(arms)
    for row, version in zip(rows, sorted(arms), strict=True):
        rs = arms[version]
        checkpoint, steps, reward, validated, _jobs, worst = row
        assert checkpoint == "base model" if version == 0 else checkpoint.endswith(f"{version:04d}`")
        assert int(steps) == version  # the golden run publishes sampler v<n> at outer step n
        assert float(reward) == pytest.approx(mean([r.reward for r in rs]), abs=6e-4)
        assert validated == f"{sum(r.validated for r in rs)}/{len(rs)}"
        assert float(worst) == pytest.approx(min(r.reward for r in rs), abs=6e-4)


def test_spend_and_csvs_match_the_log(report: Path) -> None:
    records = golden_records()
    md = (report / "report.md").read_text()
    costs = _section(md, "Costs")
    settled = of_type(records, CostSettled)
    total = next(r for r in _rows(costs) if r[0] == "total")
    assert total[1] == f"${sum(e.usd for e in settled):,.3f}"
    for kind in sorted({e.kind for e in settled}):
        row = next(r for r in _rows(costs) if r[0] == kind)
        assert row[1] == f"${sum(e.usd for e in settled if e.kind == kind):,.3f}"
    jobs = list(csv.DictReader(io.StringIO((report / "jobs.csv").read_text())))
    assert [j["job_id"] for j in jobs] == [e.job_id for e in of_type(records, JobQueued)]
    failed = {e.job_id for e in of_type(records, JobFailed)}
    for j in jobs:  # -1.0 is the CSV's "no post score" sentinel, and only there
        assert (j["post"] == "-1.0") == (j["job_id"] in failed)
    steps = list(csv.DictReader(io.StringIO((report / "steps.csv").read_text())))
    assert [int(s["step"]) for s in steps] == sorted(step_episodes(records))


def test_report_of_a_run_with_nothing_yet(tmp_path: Path) -> None:
    """A run that has only started still gets every file, each plot saying there is no data yet."""
    import anyio

    from views.report.plots import PLOTS

    run = tmp_path / "runs" / "empty"

    async def write() -> None:
        async with Runtime(run, [], clock=ManualClock()) as rt:
            await rt.emit(RunStarted(run_id="empty", seed=1, code_version="t"))

    anyio.run(write)
    files = write_report(run, tmp_path / "out")
    assert [p.name for p in files.plots] == list(PLOTS)
    assert all(p.stat().st_size > 5_000 for p in files.plots)
    md = files.markdown.read_text()
    assert "No holdout arm in this run." in md and "No job was queued yet." in md


def test_the_header_counts_episodes_the_log_never_finished(tmp_path: Path, report: Path) -> None:
    """A finished `ait train` leaves its in-flight episodes open for a later resume: the header says how many."""
    import anyio

    run = tmp_path / "runs" / "open"

    async def write() -> None:
        async with Runtime(run, [], clock=ManualClock()) as rt:
            await rt.emit(RunStarted(run_id="open", seed=1, code_version="t"))
            for i in range(3):
                await rt.emit(EpisodeStarted(episode_id=f"e{i}", task_id="t", family="calc_chain", policy="p"))
            await rt.emit(EpisodeFinished(episode_id="e1", status="validated"))
            await rt.emit(RunFinished(status="ok", reason="steps applied"))

    anyio.run(write)
    md = write_report(run, tmp_path / "out").markdown.read_text()
    assert "| episodes finished | 1 (validated 1); 2 more started, not finished when the log ends |" in md
    # The golden run, whose every episode finished, says nothing of the kind.
    records = golden_records()
    assert len(of_type(records, EpisodeStarted)) == len(of_type(records, EpisodeFinished))
    assert "not finished when the log ends" not in (report / "report.md").read_text()


def test_report_cli_prints_what_it_wrote(cli_run: tuple[Path, str]) -> None:
    from views.report.plots import PLOTS

    out, printed = cli_run
    paths = printed.split()
    assert paths[0] == str(out / "report.md") and len(paths) == 1 + len(PLOTS) + 2
    assert all(Path(p).is_file() for p in paths)
