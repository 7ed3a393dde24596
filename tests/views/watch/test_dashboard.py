"""The dashboard against the golden run: what is on the screen matches counts taken straight from the log.

Screens are rendered in rich's own test console (``Console(record=True)``) at a fixed width; the oracle is
tests/golden/facts.py, which counts raw events without any projection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from engine.fmt import format_usd
from events import (
    BudgetSet,
    CostSettled,
    EpisodeFinished,
    EpisodeStarted,
    JobFailed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    PodLost,
    PodProvisionFailed,
    PodRequested,
    Recorded,
    RunFinished,
    SubmissionRejected,
)
from tests.golden.facts import golden_records, mean, of_type, rewards_by_episode, step_episodes
from views.watch.folder import RunFolder
from views.watch.live import frame
from views.watch.render import render
from views.watch.view import DashboardView

WIDTH = 150


def folded(records: Sequence[Recorded], tmp: Path | None = None) -> RunFolder:
    folder = RunFolder((tmp or Path("/nonexistent")) / "events.jsonl")
    for rec in records:
        folder.fold(rec)
    return folder


def screen(view: DashboardView, width: int = WIDTH) -> str:
    console = Console(record=True, width=width, file=open("/dev/null", "w"))  # noqa: SIM115
    try:
        console.print(render(view, width))
        return console.export_text()
    finally:
        console.file.close()


def cut_with_running_jobs() -> int:
    """The first seq after which two jobs are running and an episode is still open (a mid-run screen)."""
    running: set[str] = set()
    open_eps: set[str] = set()
    for rec in golden_records():
        e = rec.event
        if isinstance(e, JobStarted):
            running.add(e.job_id)
        elif isinstance(e, JobSucceeded | JobFailed | JobRequeued):
            running.discard(e.job_id)
        elif isinstance(e, EpisodeStarted):
            open_eps.add(e.episode_id)
        elif isinstance(e, EpisodeFinished):
            open_eps.discard(e.episode_id)
        if len(running) >= 2 and open_eps:
            return rec.seq
    raise AssertionError("the golden run never has two running jobs")


@pytest.fixture(scope="module")
def final_screen() -> str:
    return screen(frame(folded(golden_records())))


def test_header_and_outer_loop(final_screen: str) -> None:
    records = golden_records()
    steps = step_episodes(records)
    assert "golden-run" in final_screen and "finished:ok" in final_screen
    assert f"{len(records):,} events" in final_screen
    last = max(steps)
    assert f"step {last} of {last}" in final_screen
    n = len(steps[last])
    assert re.search(rf"batch {last}\s+█+\s+{n}/{n} rewarded \({n} started\)\s+trained", final_screen)


def test_episode_counts(final_screen: str) -> None:
    records = golden_records()
    finished = [e.status for e in of_type(records, EpisodeFinished)]
    started = of_type(records, EpisodeStarted)
    assert re.search(rf"started\s+{len(started)}\s+open\s+0\b", final_screen)  # finished: nothing runs
    assert re.search(
        rf"validated\s+{finished.count('validated')}\s+rejected\s+{finished.count('rejected')}\b", final_screen
    )
    assert re.search(rf"no submission\s+{finished.count('no_submission')}\b", final_screen)
    holdout = sum(1 for e in started if e.family == "triage")
    assert re.search(rf"holdout\s+{holdout} \(0 open\)", final_screen)


_ROW = re.compile(
    r"│\s+(\d+)\s+(\d+)/(\d+)\s+([+-]\d\.\d{3})\s+(\d\.\d{3})\s+([+-]\d\.\d{3})\s+(\d\.\d{3})\s+(-|[+-]\d\.\d{3})\s+(\w+)"
)


def test_reward_rows_match_the_log(final_screen: str) -> None:
    records = golden_records()
    rewards = rewards_by_episode(records)
    rows = {int(m[0]): m for m in _ROW.findall(final_screen)}
    steps = step_episodes(records)
    assert sorted(rows) == sorted(steps)
    for step, ids in steps.items():
        rs = [rewards[e] for e in ids]
        row = rows[step]
        assert int(row[1]) == int(row[2]) == len(ids)
        assert float(row[3]) == pytest.approx(mean([r.reward for r in rs]), abs=6e-4)  # printed with 3 decimals
        assert float(row[4]) == pytest.approx(
            mean([r.w_validation * r.validation for r in rs]), abs=6e-4
        )  # printed with 3 decimals
        assert float(row[5]) == pytest.approx(
            mean([r.w_quality * r.quality for r in rs]), abs=6e-4
        )  # printed with 3 decimals
        assert float(row[6]) == pytest.approx(
            mean([r.w_speed * r.speed for r in rs]), abs=6e-4
        )  # printed with 3 decimals
        assert row[8] == "trained"
    first, last = min(steps), max(steps)
    assert f"{float(rows[first][3]):+.3f} → {float(rows[last][3]):+.3f}" in final_screen  # the sparkline's ends


def test_budget_burn(final_screen: str) -> None:
    records = golden_records()
    spent = sum(e.usd for e in of_type(records, CostSettled))
    caps = of_type(records, BudgetSet)[-1]
    assert caps.run_usd is not None and caps.global_usd is not None
    run_line = next(line for line in final_screen.splitlines() if re.search(r"│\s+run\s", line))
    assert format_usd(spent, places=2) in run_line and format_usd(caps.run_usd, places=2) in run_line
    assert f"{100 * spent / caps.run_usd:.0f}%" in run_line
    global_line = next(line for line in final_screen.splitlines() if re.search(r"│\s+global\s", line))
    assert format_usd(caps.global_spent_before_usd + spent, places=2) in global_line


def test_fleet_rows_by_gpu(final_screen: str) -> None:
    requested = of_type(golden_records(), PodRequested)
    for gpu, label in (("NVIDIA A40", "A40"), ("NVIDIA GeForce RTX 4090", "RTX 4090")):
        n = sum(1 for p in requested if p.gpu_type == gpu)
        # A finished run: every pod ended (lost pods were terminated too).
        assert re.search(rf"│\s+{label}\s+0\s+0\s+0\s+0\s+{n}\s+\d", final_screen), label
    assert "out of stock: RTX A5000" in final_screen
    failed = of_type(golden_records(), PodProvisionFailed)
    assert f"provision failures: stock_out x{len(failed)}" in final_screen


def test_last_errors_newest_first(final_screen: str) -> None:
    records = golden_records()
    kinds = (JobFailed, SubmissionRejected, PodLost, JobRequeued, PodProvisionFailed)
    errors = [r for r in records if isinstance(r.event, kinds)]
    table = final_screen.split("recent errors")[1]
    seqs = [int(s) for s in re.findall(r"│\s+(\d+)\s+\d\d:\d\d:\d\d\s", table)]
    assert seqs == [r.seq for r in reversed(errors[-8:])]
    totals = {"job.failed": JobFailed, "submission.rejected": SubmissionRejected, "pod.lost": PodLost}
    for name, cls in totals.items():
        assert f"{name} {len(of_type(records, cls))}" in table
    newest_rejection = next(r.event for r in reversed(records) if isinstance(r.event, SubmissionRejected))
    check = next(c for c in newest_rejection.checks if not c.ok)
    assert f"{check.name}: " in table  # the failed check is named


def test_mid_run_screen_shows_running_work() -> None:
    cut = cut_with_running_jobs()
    records = golden_records()[: cut + 1]
    text = screen(frame(folded(records)))
    started = of_type(records, EpisodeStarted)
    finished = of_type(records, EpisodeFinished)
    assert "running" in text.splitlines()[0]
    assert re.search(rf"running\s+{len(started) - len(finished)}\b", text)
    running = {e.job_id for e in of_type(records, JobStarted)} - {
        e.job_id for e in of_type(records, JobSucceeded | JobFailed | JobRequeued)
    }
    assert len(running) >= 2
    for job_id in running:
        assert job_id in text
    queued = len(of_type(records, JobQueued))
    ended = len(of_type(records, JobSucceeded)) + len(of_type(records, JobFailed))
    counts = re.search(r"jobs: queued (\d+)\s+requeued (\d+)\s+assigned (\d+)\s+running (\d+)", text)
    assert counts is not None and sum(int(c) for c in counts.groups()) == queued - ended


def test_narrow_terminal_stacks_the_panels() -> None:
    text = screen(frame(folded(golden_records())), width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    for title in ("outer loop", "episodes", "reward per outer step", "budget", "fleet", "job queue", "recent errors"):
        assert title in text


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(min_value=0, max_value=len(golden_records()) - 1))
def test_any_prefix_view_agrees_with_raw_counts(cut: int) -> None:
    records = golden_records()[: cut + 1]
    view = frame(folded(records))
    started, finished = of_type(records, EpisodeStarted), of_type(records, EpisodeFinished)
    assert view.events == cut + 1
    assert view.episodes.started == len(started)
    assert view.episodes.running == len(started) - len(finished)
    assert view.episodes.validated == sum(1 for e in finished if e.status == "validated")
    assert view.jobs.get("succeeded", 0) == len(of_type(records, JobSucceeded))
    assert sum(view.jobs.values()) == len(of_type(records, JobQueued))
    assert sum(f.booting + f.available + f.busy + f.lost + f.ended for f in view.fleet) == len(
        of_type(records, PodRequested)
    )
    run = next(b for b in view.budget if b.name == "run")
    assert run.spent_usd == pytest.approx(sum(e.usd for e in of_type(records, CostSettled)), abs=1e-5)
    for f in view.fleet:  # pod time never exceeds what the log's clock allows
        assert f.idle_s >= 0 and f.busy_s >= 0
        span = records[-1].ts - records[0].ts
        assert f.idle_s + f.busy_s <= span * (f.booting + f.available + f.busy + f.lost + f.ended) + 1e-6


def test_text_from_the_log_is_shown_verbatim_not_as_markup() -> None:
    from events import CheckResult, RunStarted

    detail = "job.toml: [prime_rl].learning_rate = 0.03: outside [bold]the range[/bold]"
    records = [
        Recorded(0, 0.0, RunStarted(run_id="r[x]", seed=1, code_version="c")),
        Recorded(1, 1.0, EpisodeStarted(episode_id="e[1]", task_id="t", family="calc_chain", policy="p")),
        Recorded(
            2,
            2.0,
            SubmissionRejected(
                episode_id="e[1]",
                attempt=1,
                checks=[CheckResult(name="bounds", ok=False, detail=detail)],
                probe_seconds=0.1,
            ),
        ),
    ]
    text = screen(frame(folded(records)), width=220)
    assert f"bounds: {detail}" in text and "e[1]#1" in text and "r[x]" in text


def test_a_finished_run_shows_its_unfinished_work_as_open_not_running() -> None:
    # The mid-run cut has open episodes and an uncollected batch; the same log then ends with run.finished (what
    # `ait train` records once its steps are applied: the episodes in flight wait for a later `ait resume`).
    records = golden_records()[: cut_with_running_jobs() + 1]
    started, finished = of_type(records, EpisodeStarted), of_type(records, EpisodeFinished)
    unfinished = len(started) - len(finished)
    live = screen(frame(folded(records)))
    assert re.search(rf"started\s+{len(started)}\s+running\s+{unfinished}\b", live)
    assert re.search(r"batch \d+\s+\S+\s+\d+/\d+ rewarded \(\d+ started\)\s+running", live)
    last = records[-1]
    end = Recorded(last.seq + 1, last.ts + 1.0, RunFinished(status="ok", reason="max steps"))
    text = screen(frame(folded([*records, end])))
    assert "finished:ok" in text.splitlines()[0]
    assert re.search(rf"started\s+{len(started)}\s+open\s+{unfinished}\b", text)
    assert re.search(r"batch \d+\s+\S+\s+\d+/\d+ rewarded \(\d+ started\)\s+open", text)
    assert re.search(r"holdout\s+\d+ \(\d+ open\)", text)
    assert not re.search(r"\brunning\b", text.split("job queue")[0]), text
