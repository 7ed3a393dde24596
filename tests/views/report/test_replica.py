"""The CPU replica's report sections (views/report/replica.py): each step's share of each choice next to the
grid's best, first vs last steps and the holdout arm before/after with n and a bootstrap interval; on plain
data, and on a small synthetic replica log (real events and job bundles) read as ``ait report`` reads it."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from cli import main
from tests.fakes.replica_log import BEST, WORST, write_grid, write_replica_log
from views.report.data import collect
from views.report.markdown import markdown
from views.report.replica import GridError, bootstrap_diff, bootstrap_mean, load_grid, replica_data
from views.report.replica_md import choice_share_csv

ROOT = Path(__file__).resolve().parents[3]


def test_bootstrap_intervals_cover_the_mean_and_see_a_real_rise() -> None:
    flat = bootstrap_mean([0.3] * 6)
    assert (flat.n, flat.mean, flat.low, flat.high) == (6, pytest.approx(0.3), pytest.approx(0.3), pytest.approx(0.3))
    noisy = bootstrap_mean([0.0, 1.0] * 10)
    assert noisy.low < 0.5 < noisy.high and noisy.n == 20
    rise = bootstrap_diff([0.0, 0.1, 0.0, 0.2] * 5, [0.5, 0.6, 0.4, 0.7] * 5)
    assert rise.excludes_zero and rise.mean == pytest.approx(0.475) and rise.n == 40
    same = bootstrap_diff([0.0, 1.0] * 5, [1.0, 0.0] * 5)
    assert not same.excludes_zero
    assert bootstrap_mean([0.1, 0.9, 0.4]) == bootstrap_mean([0.1, 0.9, 0.4])  # seeded: the same report twice


def test_shares_first_vs_last_and_holdout_arms_from_plain_data(tmp_path: Path) -> None:
    steps = [(s, [f"e{s}{i}" for i in range(4)]) for s in range(6)]
    # The agent drifts from 0.6B/wrong to 1.7B/correct; one episode of step 0 queued no job.
    labels = {e: (BEST if s >= 3 or i == 0 else WORST).label for s, ids in steps for i, e in enumerate(ids)}
    del labels["e01"]
    rewards = {e: (0.5 if labels.get(e) == BEST.label else 0.0) for _, ids in steps for e in ids}
    holdout = [(f"h0{i}", "triage", 0) for i in range(5)] + [(f"h6{i}", "triage", 6) for i in range(4)]
    rewards |= {f"h0{i}": 0.1 for i in range(5)} | {f"h6{i}": 0.3 for i in range(4)}
    data = replica_data(steps, rewards, labels, holdout, grid=load_grid(write_grid(tmp_path)))
    assert data is not None and data.grid is not None and data.grid.means == {"1.7B/correct/1e-05": 0.41}
    assert [(s.step, s.episodes, s.best) for s in data.steps] == [(s, 4, 1 if s < 3 else 4) for s in range(6)]
    assert data.steps[0].counts == {"1.7B/correct/1e-05": 1, "no job": 1, "0.6B/wrong/3e-05": 2}
    assert data.k == 3 and data.first is not None and data.last is not None and data.rise is not None
    assert (data.first.n, data.last.n) == (12, 12) and data.last.mean == pytest.approx(0.5)
    assert data.rise.excludes_zero
    (arm,) = data.holdout
    assert (arm.family, arm.before_version, arm.after_version, arm.before.n) == ("triage", 0, 6, 5)
    assert arm.after is not None and arm.after.n == 4 and arm.diff is not None
    assert arm.diff.mean == pytest.approx(0.2)
    # A run none of whose jobs is a replica choice has no replica section.
    assert replica_data(steps, rewards, dict.fromkeys(labels), holdout, grid=None) is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "cannot read the grid"),
        ('{"top": "1.7B/correct/1e-05"}', "field 'best' must be a list"),
        ('{"best": ["2B/correct"]}', "'2B/correct'"),
        ('{"best": [], "eval_key_fingerprint": 7}', "field 'eval_key_fingerprint' must be a string"),
    ],
)
def test_a_grid_that_does_not_fit_is_one_line_naming_the_file(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "g.json"
    path.write_text(text)
    with pytest.raises(GridError) as info:
        load_grid(path)
    assert str(path) in str(info.value) and needle in str(info.value) and "\n" not in str(info.value)


def test_ait_report_shows_the_replica_sections(tmp_path: Path) -> None:
    run = tmp_path / "replica"
    write_replica_log(run)
    # The report's text from its data (the plots, drawn by every other report test, would be most of the time).
    data = collect(run, grid=write_grid(tmp_path))
    assert data.replica is not None
    md = markdown(data, [])
    choices = md.split("## Replica: the agent's choices\n", 1)[1].split("\n## ", 1)[0]
    assert "`1.7B/correct/1e-05` (+0.410)" in choices
    # The choices made, in the choice module's order:
    assert "| grid's best | 0.6B/wrong/3e-05 | 1.7B/correct/1e-05 |" in choices
    assert "| 0 | 4 | 1 (25%) | 3 (75%) | 1 (25%) |" in choices
    assert "| 1 | 4 | 4 (100%) | 0 (0%) | 4 (100%) |" in choices
    assert "| last − first |  | +0.500 [" in choices and "excludes zero" in choices
    holdout = md.split("## Holdout\n", 1)[1].split("\n## ", 1)[0]
    assert "| triage before | v0 | 3 | +0.210 [" in holdout and "| triage after | v2 | 3 | +0.410 [" in holdout
    assert "| triage after − before |  |  | +0.200 [" in holdout
    assert "| learner backend | local |" in md  # a learning arm; its control says so (below)
    adoption = md.split("## [prime_rl] key adoption\n", 1)[1].split("\n## ", 1)[0]
    assert "A CPU replica run: its template dictates the `[prime_rl]` lines" in adoption
    rows = choice_share_csv(data.replica).splitlines()
    assert "](choice_share.png)" in markdown(data, ["choice_share.png"])
    assert rows[0] == "step,choice,episodes,share,grid_best" and "1,1.7B/correct/1e-05,4,1.000000,1" in rows

    # `ait report --grid` reaches the same reader: a grid that does not fit is one line and exit status 2.
    bad = tmp_path / "bad.json"
    bad.write_text('{"best": 3}')
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", str(run), "--out", str(tmp_path / "out"), "--grid", str(bad)]) == 2
    assert err.getvalue().startswith("ait report: --grid ") and str(bad) in err.getvalue()


def test_the_choice_plot_draws_shares_and_the_grids_best(tmp_path: Path) -> None:
    from matplotlib.image import imread

    from views.report.plots import choice_share, plots_for  # matplotlib: in the test, never at collection

    run = tmp_path / "replica"
    write_replica_log(run)
    data = collect(run, grid=write_grid(tmp_path))
    assert "choice_share.png" in plots_for(data)
    choice_share(data, tmp_path / "c.png")
    pixels = imread(tmp_path / "c.png")
    assert pixels.shape[1] >= 900 and 0.03 < (pixels[..., :3].mean(axis=2) < 0.9).mean() < 0.8


def test_the_control_arm_says_it_applied_no_update(tmp_path: Path) -> None:
    run = tmp_path / "control"
    write_replica_log(run, holdout=False, learn=False)
    data = collect(run, grid=write_grid(tmp_path))
    assert data.control
    assert "| learner backend | local (`learn = false`: the no-learning control, no update applied) |" in markdown(
        data, []
    )


def test_the_report_says_when_the_grid_was_measured_under_another_eval_key(tmp_path: Path) -> None:
    # Another key draws other hidden tasks: the grid's best choices are then not a measurement of this run's.
    def careful(grid_key: str | None, run_key: str | None, name: str) -> str:
        run = tmp_path / name
        write_replica_log(run, key_fingerprint=run_key)
        (tmp_path / name / "g").mkdir()
        data = collect(run, grid=write_grid(tmp_path / name / "g", key_fingerprint=grid_key))
        assert data.replica is not None and data.replica.grid is not None
        choices = markdown(data, []).split("## Replica: the agent's choices\n", 1)[1].split("\n## ", 1)[0]
        return choices.split("**Careful:**", 1)[1].split("\n", 1)[0] if "**Careful:**" in choices else ""

    said = careful("d784abb44216ecb5", "0123456789abcdef", "other")
    assert "eval key d784abb44216ecb5, this run under 0123456789abcdef" in said and "replica_grid.py" in said
    assert careful("d784abb44216ecb5", "d784abb44216ecb5", "same") == ""
    # Unknown on either side (a grid of before the field; baselines given in a config, frozen under no key).
    assert careful(None, "0123456789abcdef", "old-grid") == ""
    assert careful("d784abb44216ecb5", "", "config-baselines") == ""
    assert careful("d784abb44216ecb5", None, "no-baselines") == ""


def test_the_committed_grid_names_the_key_it_was_measured_under() -> None:
    from families import key_fingerprint
    from views.report.replica import DEFAULT_GRID

    # The suite runs under the committed test key (tests/conftest.py), the key the grid says it used.
    assert "eval-test.key" in os.environ["AIT_EVAL_KEY_FILE"]
    grid = load_grid(DEFAULT_GRID)
    assert grid.key_fingerprint == key_fingerprint() != ""
    assert json.loads(DEFAULT_GRID.read_text())["eval_key"] == "committed test key"
