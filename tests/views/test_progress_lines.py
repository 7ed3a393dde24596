"""The console's progress lines: one short line per event that says what the run is doing now."""

from __future__ import annotations

import io

import anyio
from rich.console import Console

from engine.runtime import Runtime
from events import (
    CheckResult,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobStarted,
    JobStoppedEarly,
    JobSucceeded,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
)
from views.progress_lines import ProgressLines, line_for


def test_each_phase_of_a_job_has_its_line() -> None:
    assert line_for(SubmissionReceived(episode_id="e", attempt=1)) == (
        "submission 1: validating in the sandboxed probe..."
    )
    ok = SubmissionValidated(episode_id="e", attempt=1, checks=[CheckResult(name="a", ok=True)], probe_seconds=2.5)
    assert line_for(ok) == "submission 1: validated in 2.5 s (1 checks passed)"
    bad = CheckResult(name="smoke", ok=False, detail="env did not load")
    rejected = line_for(SubmissionRejected(episode_id="e", attempt=2, checks=[bad], probe_seconds=1.0)) or ""
    assert "smoke: env did not load" in rejected
    queued = JobQueued(job_id="j", episode_id="e", family="calc_chain", base_model="M", bundle="b", time_budget_s=60)
    assert line_for(queued) == "job j queued: M on calc_chain, time budget 60 s"
    assert line_for(JobStarted(job_id="j", pod_id="p")) == "job j running on pod p"
    assert line_for(JobProgressed(job_id="j", step=0, phase="pre_score")) == (
        "  pre-score (base model, hidden eval): scoring..."
    )
    assert line_for(JobProgressed(job_id="j", step=0, phase="pre_score", reward=0.27)) == (
        "  pre-score (base model, hidden eval): 0.270"
    )
    step = JobProgressed(job_id="j", step=3, total_steps=10, phase="train", reward=0.5, loss=0.01)
    assert line_for(step) == "  train step 3 of 10: mean reward 0.500, loss 0.0100"
    past = JobProgressed(job_id="j", step=3, total_steps=2, phase="train", reward=0.5)
    assert line_for(past) == "  train step 3: mean reward 0.500"  # never "3 of 2"
    stopped = JobStoppedEarly(job_id="j", steps_done=4, steps_total=10, reason="deadline")
    assert "stopped at step 4 of 10: deadline" in (line_for(stopped) or "")
    done = JobSucceeded(job_id="j", pre=0.2, post=0.3, train_seconds=42.0, metrics={"eval_n": 200.0})
    assert line_for(done) == "job j succeeded: pre 0.200, post 0.300 on 200 hidden tasks; trained 42 s"
    assert "oom: out of memory" in (line_for(JobFailed(job_id="j", reason="oom", detail="out of memory")) or "")


def test_the_reactor_prints_lines_as_events_are_recorded(tmp_path: object) -> None:
    from pathlib import Path

    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)

    async def go() -> None:
        async with Runtime(Path(str(tmp_path)) / "run", []) as rt:
            rt.start_reactor(ProgressLines(console))
            await rt.emit(JobStarted(job_id="j", pod_id="p"))
            await rt.emit(JobStoppedEarly(job_id="j", steps_done=1, steps_total=2, reason="deadline"))
            with anyio.fail_after(5):
                while "deadline" not in out.getvalue():
                    await anyio.sleep(0.01)

    anyio.run(go)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("s job j running on pod p")
    assert lines[1].endswith("job j stopped at step 1 of 2: deadline")


def test_a_summary_printed_after_caught_up_comes_after_the_lines_it_sums_up(tmp_path: object) -> None:
    # `ait episode` printed "episode validated after 7 turns" above the probe's "submission 1: validated" line:
    # the reactor reads events a moment after they are recorded. caught_up waits for it.
    from pathlib import Path

    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)

    async def go() -> None:
        async with Runtime(Path(str(tmp_path)) / "run", []) as rt:
            progress = ProgressLines(console)
            rt.start_reactor(progress)
            for i in range(20):
                await rt.emit(JobProgressed(job_id="j", step=i + 1, total_steps=20, reward=0.5, phase="train"))
            await rt.emit(JobStoppedEarly(job_id="j", steps_done=20, steps_total=20, reason="deadline"))
            with anyio.fail_after(5):
                await progress.caught_up(rt.next_seq - 1)
            console.print("SUMMARY")

    anyio.run(go)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "SUMMARY" and lines[-2].endswith("job j stopped at step 20 of 20: deadline"), lines[-3:]


def test_caught_up_gives_up_on_a_reactor_that_never_reads() -> None:
    progress = ProgressLines(Console(file=io.StringIO()))

    async def go() -> float:
        started = anyio.current_time()
        await progress.caught_up(3, timeout_s=0.05)  # no reactor runs: it must not wait for ever
        return anyio.current_time() - started

    assert 0.05 <= anyio.run(go) < 2
