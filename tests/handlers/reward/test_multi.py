"""The multi-job reward rule (docs/reward.md, "Multi-job episodes"): hypothesis properties over episode states."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.episode.projection import EpisodeJob, EpisodeState
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward
from handlers.reward.multi import multi_inputs

CFG = RewardConfig()
BUDGET = 600.0
scores = st.floats(0.0, 1.0)


@st.composite
def jobs(draw: st.DrawFn, n: int) -> list[EpisodeJob]:
    out = []
    for i in range(1, n + 1):
        status = draw(st.sampled_from(["succeeded", "failed"]))
        ok = status == "succeeded"
        out.append(
            EpisodeJob(
                job_id=f"ep-job-{i}",
                index=i,
                status=status,
                reserve_s=BUDGET,
                post=draw(scores) if ok else None,
                pre=draw(scores) if ok else None,
                train_seconds=draw(st.floats(0.0, 2 * BUDGET)) if ok else 0.0,
                failure="" if ok else "oom",
            )
        )
    return out


def episode(js: list[EpisodeJob], final: int | None, *, rejected: int = 0, status: str = "finished") -> EpisodeState:
    return EpisodeState(
        episode_id="ep",
        task_id="t",
        family="calc_chain",
        policy="p",
        status=status,
        parseable=True,
        attempts=len(js) + rejected,
        rejected=rejected,
        max_jobs=4,
        jobs={j.job_id: j for j in js},
        final_job=js[final].job_id if final is not None else "",
    )


def reward(ep: EpisodeState, best: float) -> float:
    inputs = multi_inputs(ep, best=best)
    assert inputs is not None
    return compute_reward(inputs, CFG).reward


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 4), best=scores, rejected=st.integers(0, 3))
def test_only_the_final_jobs_hidden_score_enters_quality(data: st.DataObject, n: int, best: float, rejected: int):
    js = data.draw(jobs(n))
    final = data.draw(st.integers(0, n - 1))
    ep = episode(js, final, rejected=rejected)
    base = compute_reward(multi_inputs(ep, best=best), CFG)  # type: ignore[arg-type]
    # Any other job's hidden scores may change: the quality term does not move.
    for i, j in enumerate(js):
        if i != final and j.status == "succeeded":
            j.post, j.pre = data.draw(scores), data.draw(scores)
    again = compute_reward(multi_inputs(ep, best=best), CFG)  # type: ignore[arg-type]
    assert again.quality == base.quality and again.reward == base.reward
    assert base.job_id == js[final].job_id
    assert base.validation == CFG.validation_decay**rejected


@settings(max_examples=150, deadline=None)
@given(post=scores, best=scores, train=st.floats(0.0, 2 * BUDGET))
def test_one_final_job_equals_the_one_shot_reward(post: float, best: float, train: float):
    job = EpisodeJob(job_id="ep-job-1", index=1, status="succeeded", reserve_s=BUDGET, post=post, train_seconds=train)
    multi = compute_reward(multi_inputs(episode([job], 0), best=best), CFG)  # type: ignore[arg-type]
    one_shot = compute_reward(
        RewardInputs(
            episode_id="ep",
            parseable=True,
            attempts=1,
            validated=True,
            job_status="succeeded",
            post=post,
            best_pre=best,
            train_seconds=train,
            time_budget_s=BUDGET,
        ),
        CFG,
    )
    assert (multi.reward, multi.validation, multi.quality, multi.speed) == (
        one_shot.reward,
        one_shot.validation,
        one_shot.quality,
        one_shot.speed,
    )


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 3), best=scores)
def test_another_job_never_raises_the_reward(data: st.DataObject, n: int, best: float):
    """Adding a job that is not the final one costs speed and never adds quality."""
    js = data.draw(jobs(n))
    final = n - 1
    before = reward(episode(js, final), best)
    extra = msgspec.structs.replace(data.draw(jobs(1))[0], job_id="ep-job-x", index=n + 1)
    after = reward(episode([*js, extra], final), best)
    assert after <= before


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(0, 3), parseable=st.booleans(), status=st.sampled_from(["no_final", "error"]))
def test_no_valid_final_job_gets_todays_penalty(data: st.DataObject, n: int, parseable: bool, status: str):
    ep = episode(data.draw(jobs(n)), None, status=status)
    ep.parseable = parseable or n > 0
    rc = compute_reward(multi_inputs(ep, best=0.3), CFG)  # type: ignore[arg-type]
    assert rc.reward == (0.0 if ep.parseable else CFG.no_submission_reward)
    assert rc.quality == 0.0 and not rc.validated


def test_not_due_while_running_or_while_a_job_is_out() -> None:
    done = EpisodeJob(job_id="ep-job-1", index=1, status="succeeded", reserve_s=BUDGET, post=0.5, train_seconds=1.0)
    out = EpisodeJob(job_id="ep-job-2", index=2, status="running", reserve_s=BUDGET)
    assert multi_inputs(episode([done, out], 0, status="running"), best=0.2) is None
    assert multi_inputs(episode([done, out], 0), best=0.2) is None  # job-2 still counts towards speed
    out.status, out.train_seconds, out.post = "succeeded", 2.0, 0.1
    inputs = multi_inputs(episode([done, out], 0), best=0.2)
    assert inputs is not None and inputs.train_seconds == 3.0 and inputs.post == 0.5
