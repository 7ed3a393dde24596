"""The dashboard's own projections: batch membership, pod idle/busy time, recent errors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events import (
    NOT_RUN,
    BatchCollected,
    BatchStarted,
    CheckResult,
    EpisodeStaleDiscarded,
    EpisodeStarted,
    EventBody,
    JobAssigned,
    JobSucceeded,
    LoRAStepApplied,
    PodLost,
    PodReady,
    PodRequested,
    Recorded,
    RunStarted,
    RunWiring,
    SubmissionRejected,
)
from views.watch.errors import KEEP, ErrorsProjection
from views.watch.outer import OuterProjection
from views.watch.podtime import PodTimeProjection, gpu_time


def recs(*items: tuple[float, EventBody]) -> list[Recorded]:
    return [Recorded(i, ts, body) for i, (ts, body) in enumerate(items)]


def ep(eid: str, task: str) -> EpisodeStarted:
    return EpisodeStarted(episode_id=eid, task_id=task, family="calc_chain", policy="p")


def test_episodes_join_the_open_batch_of_their_task_up_to_the_group_size() -> None:
    state = OuterProjection().fold(
        recs(
            (0, RunStarted(run_id="r", seed=1, code_version="c", config={"outer": {"steps": 3}})),
            (1, BatchStarted(step=1, task_ids=["a", "b"], group_size=2)),
            (2, ep("e1", "a")),
            (3, ep("e2", "a")),
            (4, ep("e3", "a")),  # a third episode of task a: no slot left in batch 1
            (5, ep("h1", "triage-0")),  # a holdout episode: no batch
            (6, EpisodeStaleDiscarded(episode_id="e2", sampler_version=0, step=1)),
            (7, ep("e4", "a")),  # takes the slot e2 freed
            (8, BatchCollected(step=1, episode_ids=["e1", "e4"])),
            (9, LoRAStepApplied(step=1, metrics={"loss": 0.3})),
        )
    )
    b = state.batches["1"]
    assert state.planned_steps == 3 and b.expected == 4
    assert b.episodes == ["e1", "e4"] and b.collected and b.trained and b.metrics == {"loss": 0.3}
    assert state.episode_step == {"e1": 1, "e4": 1}
    assert state.stale_discarded == 1 and state.lora_steps == 1


def test_each_start_and_resume_moves_the_plan_to_the_step_it_runs_to() -> None:
    def wired(steps: int) -> RunWiring:
        return RunWiring(inner_trainer="standin", learner_backend="offline", provider="local", steps=steps)

    started = (0.0, RunStarted(run_id="r", seed=1, code_version="c", config={"steps": 2}))
    fold = OuterProjection().fold
    assert fold(recs(started), OuterProjection().initial()).planned_steps == 2
    # `ait train` says 2, a later `ait resume --max-steps 3` says 3; a wiring that says nothing (an `ait episode`,
    # or a log from before the field) leaves the plan as it was.
    s = fold(recs(started, (1.0, wired(2)), (2.0, wired(3)), (3.0, wired(0))), OuterProjection().initial())
    assert s.planned_steps == 3


def test_collected_overrides_the_guess() -> None:
    state = OuterProjection().fold(
        recs(
            (0, BatchStarted(step=1, task_ids=["a"], group_size=1)),
            (1, ep("e1", "a")),
            (2, BatchCollected(step=1, episode_ids=["x9"])),
        )
    )
    assert state.batches["1"].episodes == ["x9"] and state.episode_step == {"x9": 1}


def _pod_events(gaps: list[float]) -> list[Recorded]:
    """Pod p0 ready at t=0, then alternately idle and busy for each gap; lost at the end."""
    items: list[tuple[float, EventBody]] = [
        (0.0, PodRequested(pod_id="p0", gpu_type="A40", provider="sim", key="k")),
        (0.0, PodReady(key="k", pod_id="p0", provider_id="x", url="u", gpu_type="A40")),
    ]
    t = 0.0
    for i, gap in enumerate(gaps):
        t += gap
        job = f"j{i // 2}"
        if i % 2 == 0:
            items.append((t, JobAssigned(job_id=job, pod_id="p0", key=f"a{i}")))
        else:
            items.append((t, JobSucceeded(key=f"a{i - 1}", job_id=job, pre=0, post=0, train_seconds=1, pod_id="p0")))
    items.append((t + 5.0, PodLost(pod_id="p0", reason="gone")))
    return recs(*items)


@given(st.lists(st.floats(min_value=0, max_value=1e4), max_size=12))
def test_idle_plus_busy_is_the_pods_life(gaps: list[float]) -> None:
    records = _pod_events(gaps)
    state = PodTimeProjection().fold(records)
    t = gpu_time(state, now=records[-1].ts + 100.0)["A40"]  # lost: nothing accrues after it
    assert abs(t.idle_s + t.busy_s - records[-1].ts) < 1e-6 * max(1.0, records[-1].ts)
    # Busy from each assignment to its outcome; a job still running when the pod is lost was busy until then.
    busy = sum(g for i, g in enumerate(gaps) if i % 2 == 1) + (5.0 if len(gaps) % 2 else 0.0)
    assert abs(t.busy_s - busy) < 1e-6 * max(1.0, records[-1].ts)


def test_errors_keep_the_last_and_count_all() -> None:
    rejected = [
        SubmissionRejected(
            episode_id=f"e{i}",
            attempt=1,
            checks=[CheckResult(name="bounds", ok=False, detail="lr too high"), CheckResult(name="x", ok=True)],
            probe_seconds=1.0,
        )
        for i in range(KEEP + 5)
    ]
    state = ErrorsProjection().fold(recs(*((float(i), r) for i, r in enumerate(rejected))))
    assert len(state.recent) == KEEP and state.recent[-1].subject == f"e{KEEP + 4}#1"
    assert state.counts == {"submission.rejected": KEEP + 5} and state.failed_checks == {"bounds": KEEP + 5}
    assert state.recent[0].message == "bounds: lr too high"


def test_a_check_an_earlier_failure_kept_from_running_is_not_counted_as_a_rejection() -> None:
    checks = [
        CheckResult(name="job_config", ok=False, detail="job.toml:3: not valid TOML"),
        CheckResult(name="static_scan", ok=True),
        *(CheckResult(name=n, ok=False, detail=NOT_RUN + "job.toml must parse first") for n in ("env_import", "tasks")),
    ]
    state = ErrorsProjection().fold(
        recs((0.0, SubmissionRejected(episode_id="e", attempt=1, checks=checks, probe_seconds=0.1)))
    )
    assert state.failed_checks == {"job_config": 1}
    assert state.recent[0].message == "job_config: job.toml:3: not valid TOML"


def test_every_dashboard_state_hashes_and_snapshots_like_the_runtime_needs() -> None:
    """Folded over the golden run, each projection's state encodes canonically and decodes back equal."""
    from engine.projection import state_hash
    from tests.golden.facts import golden_records
    from views.report.accounts import AccountsProjection
    from views.watch.folder import watch_projections

    projections = watch_projections([AccountsProjection()])
    states = {p.name: p.fold(golden_records()) for p in projections}
    assert len(state_hash(projections, states)) == 64
    for p in projections:
        assert p.encode_state(p.decode_state(p.encode_state(states[p.name]))) == p.encode_state(states[p.name])


def test_a_step_never_reads_past_its_total() -> None:
    from views.watch.render import step_of

    assert step_of(2, 10) == "2 of 10"
    assert step_of(2, 0) == "2"
    assert step_of(3, 2) == "3 (past the 2 planned at start)"  # `ait resume --max-steps 3` on a 2-step run


def test_a_pre_score_finishing_mid_training_keeps_the_job_in_training() -> None:
    from events import JobProgressed, JobStarted
    from views.watch.jobs import JobPhasesProjection

    def prog(step: int, phase: str, reward: float) -> JobProgressed:
        return JobProgressed(job_id="j", step=step, phase=phase, reward=reward, total_steps=16 if step else 0)

    state = JobPhasesProjection().fold(
        recs(
            (0, JobStarted(job_id="j", pod_id="p")),
            (1, prog(0, "pre_score", 0.27)),  # arrives before training: the phase moves as before
            (2, prog(1, "train", 0.5)),
            (3, prog(0, "pre_score", 0.27)),  # the CPU trainer scores while it trains: no step back
        )
    )
    assert (state["j"].phase, state["j"].step, state["j"].total_steps, state["j"].reward) == ("train", 1, 16, 0.5)
