"""Reward properties (issue 4, "Must show") and the worked examples of docs/reward.md."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.derive import derivers
from events import Recorded, RewardComputed
from events.codec import decode_record, encode_record
from handlers.reward.formula import (
    CSV_NO_POST,
    RewardConfig,
    RewardInputs,
    compute_reward,
    explain,
    post_for_csv,
    recompute,
    reward_bounds,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reward.md"
DEFAULT = RewardConfig()

scores = st.floats(0.0, 1.0)
seconds = st.none() | st.floats(0.0, 1e5)
budgets = st.none() | st.floats(0.0, 1e5)


@st.composite
def configs(draw: st.DrawFn) -> RewardConfig:
    return RewardConfig(
        w_validation=draw(st.floats(0, 2)),
        w_quality=draw(st.floats(0, 2)),
        w_speed=draw(st.floats(0, 2)),
        validation_decay=draw(st.floats(0.01, 1.0)),
        quality_absolute=draw(st.floats(0, 1)),
        quality_uplift=draw(st.floats(0, 1)),
        no_submission_reward=draw(st.floats(-1, 0)),
    )


@st.composite
def inputs(draw: st.DrawFn) -> RewardInputs:
    """Any consistent finished episode."""
    parseable = draw(st.booleans())
    validated = parseable and draw(st.booleans())
    attempts = draw(st.integers(1 if validated else 0, 12))
    status = draw(st.sampled_from(["succeeded", "failed", "none"])) if validated else "none"
    succeeded = status == "succeeded"
    return RewardInputs(
        episode_id="ep",
        parseable=parseable,
        attempts=attempts,
        validated=validated,
        job_status=status,
        post=draw(scores) if succeeded else draw(st.none() | scores),
        best_pre=draw(scores) if succeeded else draw(st.none() | scores),
        train_seconds=draw(seconds),
        time_budget_s=draw(budgets),
        job_failure="oom" if status == "failed" else "",
        budget_refused=draw(st.sampled_from(["", "episode", "run", "global"])),
    )


def succeeded(
    post: float, best_pre: float, attempts: int = 1, train: float | None = 600.0, budget: float | None = 3600.0
) -> RewardInputs:
    return RewardInputs(
        episode_id="ep",
        parseable=True,
        attempts=attempts,
        validated=True,
        job_status="succeeded",
        post=post,
        best_pre=best_pre,
        train_seconds=train,
        time_budget_s=budget,
    )


# -- Must show ---------------------------------------------------------------------------------------


@given(inputs(), configs())
def test_reward_stays_within_documented_bounds(x: RewardInputs, c: RewardConfig) -> None:
    lo, hi = reward_bounds(c)
    r = compute_reward(x, c)
    assert lo - 1e-12 <= r.reward <= hi + 1e-12
    assert 0.0 <= r.validation <= 1.0
    assert 0.0 <= r.speed <= 1.0
    assert -c.quality_uplift - 1e-12 <= r.quality <= c.quality_absolute + c.quality_uplift + 1e-12


def test_default_bounds_are_the_documented_ones_and_the_top_is_reached() -> None:
    assert reward_bounds(DEFAULT) == pytest.approx((-0.45, 1.0), abs=1e-12)
    best = compute_reward(succeeded(post=1.0, best_pre=0.0, train=0.0), DEFAULT)
    assert best.reward == pytest.approx(1.0, abs=1e-12)


@given(inputs(), configs(), st.integers(0, 10))
def test_more_attempts_never_raise_validation_or_reward(x: RewardInputs, c: RewardConfig, extra: int) -> None:
    fewer = compute_reward(x, c)
    more = compute_reward(msgspec.structs.replace(x, attempts=x.attempts + extra), c)
    assert more.validation <= fewer.validation
    assert more.reward <= fewer.reward


@given(scores, scores, scores, st.integers(1, 8), seconds, budgets, configs())
def test_higher_post_never_lowers_reward_at_fixed_best_pre(
    p1: float,
    p2: float,
    best_pre: float,
    attempts: int,
    train: float | None,
    budget: float | None,
    c: RewardConfig,
) -> None:
    lo, hi = sorted((p1, p2))
    r_lo = compute_reward(succeeded(lo, best_pre, attempts, train, budget), c)
    r_hi = compute_reward(succeeded(hi, best_pre, attempts, train, budget), c)
    assert r_lo.reward <= r_hi.reward


@given(inputs(), configs())
def test_a_dead_job_scores_quality_zero_and_keeps_validation(x: RewardInputs, c: RewardConfig) -> None:
    if not x.validated:
        x = msgspec.structs.replace(x, parseable=True, validated=True, attempts=max(1, x.attempts))
    dead = msgspec.structs.replace(x, job_status="failed", job_failure="oom")
    r = compute_reward(dead, c)
    assert r.outcome == "job_failed"
    assert r.quality == 0.0
    assert r.speed == 0.0
    assert r.validation == c.validation_decay ** (dead.attempts - 1) > 0
    assert r.reward == pytest.approx(c.w_validation * r.validation, abs=1e-12)


@given(inputs())
def test_no_parseable_submission_scores_minus_point_one_exactly(x: RewardInputs) -> None:
    none = msgspec.structs.replace(x, parseable=False, validated=False, job_status="none")
    r = compute_reward(none, DEFAULT)
    assert r.reward == -0.1
    assert r.outcome == "no_submission"
    assert (r.validation, r.quality, r.speed) == (0.0, 0.0, 0.0)


@given(inputs(), configs())
def test_weights_are_applied_exactly(x: RewardInputs, c: RewardConfig) -> None:
    r = compute_reward(x, c)
    if not x.parseable:
        assert r.reward == c.no_submission_reward
        return
    # Each component from its definition, written out independently of the module.
    v = c.validation_decay ** (x.attempts - 1) if x.validated else 0.0
    if x.job_status == "succeeded":
        assert x.post is not None and x.best_pre is not None
        q = c.quality_absolute * x.post + c.quality_uplift * (x.post - x.best_pre)
        s = 0.0
        if x.train_seconds is not None and x.time_budget_s:
            s = min(1.0, max(0.0, (x.time_budget_s - x.train_seconds) / x.time_budget_s))
    else:
        q = s = 0.0
    assert abs(r.validation - v) <= 1e-12
    assert abs(r.quality - q) <= 1e-12
    assert abs(r.speed - s) <= 1e-12
    assert abs(r.reward - (c.w_validation * v + c.w_quality * q + c.w_speed * s)) <= 1e-12
    assert (r.w_validation, r.w_quality, r.w_speed) == (c.w_validation, c.w_quality, c.w_speed)


# -- recomputation and the event ---------------------------------------------------------------------


@given(inputs(), configs())
@settings(max_examples=50)
def test_recompute_from_the_logged_event_is_exact(x: RewardInputs, c: RewardConfig) -> None:
    r = compute_reward(x, c)
    line = encode_record(Recorded(3, 1.0, r))
    back = decode_record(line).event
    assert isinstance(back, RewardComputed)
    assert back == r
    assert recompute(back) == r


def test_replay_verify_deriver_flags_a_tampered_reward() -> None:
    derive = derivers()[RewardComputed]
    r = compute_reward(succeeded(0.8, 0.742), DEFAULT)
    assert derive(r, {}) == r
    tampered = msgspec.structs.replace(r, reward=r.reward + 0.01)
    assert derive(tampered, {}) != tampered
    bad = msgspec.structs.replace(r, post=1.5)  # inputs today's code rejects: a mismatch, not a crash
    again = derive(bad, {})
    assert isinstance(again, RewardComputed) and again.outcome.startswith("invalid inputs")


def test_validation_schedule_is_geometric_and_configurable() -> None:
    got = [compute_reward(succeeded(0.5, 0.5, attempts=n), DEFAULT).validation for n in (1, 2, 3, 4)]
    assert got == pytest.approx([1.0, 0.5, 0.25, 0.125])
    slow = RewardConfig(validation_decay=0.9)
    assert compute_reward(succeeded(0.5, 0.5, attempts=3), slow).validation == pytest.approx(0.81)
    never = RewardInputs(episode_id="e", parseable=True, attempts=5, validated=False)
    assert compute_reward(never, DEFAULT).validation == 0.0


def test_speed_only_for_a_succeeded_job_and_clamped() -> None:
    assert compute_reward(succeeded(0.5, 0.5, train=900, budget=3600), DEFAULT).speed == pytest.approx(0.75)
    assert compute_reward(succeeded(0.5, 0.5, train=7200, budget=3600), DEFAULT).speed == 0.0
    assert compute_reward(succeeded(0.5, 0.5, train=900, budget=None), DEFAULT).speed == 0.0
    failed = RewardInputs(
        episode_id="e",
        parseable=True,
        attempts=1,
        validated=True,
        job_status="failed",
        train_seconds=10,
        time_budget_s=3600,
    )
    assert compute_reward(failed, DEFAULT).speed == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"post": CSV_NO_POST}, "sentinel"),
        ({"post": 1.2}, "post"),
        ({"best_pre": None}, "best_pre"),
        ({"parseable": False}, "parseable=False"),
        ({"attempts": 0}, "attempts"),
        ({"job_status": "exploded"}, "job_status"),
        ({"train_seconds": math.nan}, "train_seconds"),
        ({"budget_refused": "wallet"}, "budget_refused"),
    ],
)
def test_inconsistent_inputs_are_refused_with_the_field_named(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_reward(msgspec.structs.replace(succeeded(0.5, 0.5), **change), DEFAULT)


def test_config_from_mapping_names_the_bad_key() -> None:
    assert RewardConfig.from_mapping({"w_speed": 0, "validation_decay": 0.5}) == RewardConfig(
        w_speed=0.0, validation_decay=0.5
    )
    with pytest.raises(ValueError, match=r"run.toml: \[reward\] has unknown key\(s\) \['w_valid'\]"):
        RewardConfig.from_mapping({"w_valid": 0.3}, source="run.toml")
    with pytest.raises(ValueError, match=r"run\.toml: reward\.validation_decay"):
        RewardConfig.from_mapping({"validation_decay": 0}, source="run.toml")
    with pytest.raises(ValueError, match=r"reward\.w_quality: expected a number"):
        RewardConfig.from_mapping({"w_quality": "0.6"})


def test_csv_sentinel_and_explanations() -> None:
    assert post_for_csv(None) == -1.0
    assert post_for_csv(0.3) == 0.3
    dead = RewardInputs(
        episode_id="e",
        parseable=True,
        attempts=2,
        validated=True,
        job_status="failed",
        job_failure="oom",
        budget_refused="",
    )
    assert "job failed (oom)" in explain(compute_reward(dead, DEFAULT))
    nothing = RewardInputs(episode_id="e", parseable=False, attempts=0, validated=False, budget_refused="episode")
    text = explain(compute_reward(nothing, DEFAULT))
    assert "-0.100" in text and "episode budget" in text


# -- docs/reward.md worked examples ------------------------------------------------------------------

EXAMPLES = {
    "calc_chain first try": succeeded(0.80, 0.742, attempts=1, train=1200, budget=3600),
    "calc_chain third try": succeeded(0.80, 0.742, attempts=3, train=1200, budget=3600),
    "multi_hop below baseline": succeeded(0.60, 0.654, attempts=1, train=1800, budget=3600),
    "ledger second try": succeeded(0.48, 0.242, attempts=2, train=2400, budget=3600),
    "triage holdout job": succeeded(0.50, 0.352, attempts=1, train=1800, budget=3600),
    "dead job": RewardInputs(
        episode_id="e", parseable=True, attempts=1, validated=True, job_status="failed", job_failure="oom"
    ),
    "never validated": RewardInputs(episode_id="e", parseable=True, attempts=4, validated=False),
    "no submission": RewardInputs(episode_id="e", parseable=False, attempts=0, validated=False),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docs_worked_examples_match_the_code(name: str) -> None:
    """Every worked example in docs/reward.md states the reward the code computes, to 4 places."""
    text = DOCS.read_text(encoding="utf-8")
    r = compute_reward(EXAMPLES[name], DEFAULT)
    section = text.split(f"**{name}**", 1)
    assert len(section) == 2, f"docs/reward.md has no worked example titled **{name}**"
    paragraph = section[1].split("\n\n", 1)[0]
    assert f"reward = {r.reward:.4f}" in paragraph
