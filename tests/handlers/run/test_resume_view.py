"""The resume view gives the rewarder's catch-up and the reopened episodes what a full read of the log gave them,
less only what they do nothing with (records of episodes already rewarded), at any point of a run."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine.log import read_log
from events import EpisodeFinished, JobFailed, JobQueued, JobSucceeded, Recorded, RewardComputed
from handlers.episode.resume import episode_histories
from handlers.reward.reactor import RewardReactor
from handlers.run.resume_view import ResumeState, ResumeView, catch_up_records, histories
from tests.golden.make_run_log import OUT


@pytest.fixture(scope="module")
def records() -> list[Recorded]:
    return read_log(OUT / "events.jsonl").records


def _state(records: Sequence[Recorded]) -> ResumeState:
    view = ResumeView()
    state = view.fold(records)
    # Through its encoding, as a resume gets it from a snapshot.
    return view.decode_state(view.encode_state(state))


def _check(prefix: Sequence[Recorded]) -> tuple[list[Recorded], list[str]]:
    """What the view gives at the end of ``prefix`` against the full read's; returns (kept, unrewarded ids)."""
    state = _state(prefix)
    rewarded = {r.event.episode_id for r in prefix if isinstance(r.event, RewardComputed)}
    owner = {r.event.job_id: r.event.episode_id for r in prefix if isinstance(r.event, JobQueued)}
    observed = [r for r in prefix if isinstance(r.event, RewardReactor.observes)]
    kept = catch_up_records(state)
    assert [r.seq for r in kept] == sorted(r.seq for r in kept)
    assert all(r in observed for r in kept)
    for r in observed:
        e = r.event
        if r in kept:
            continue
        # Left out only what the rewarder does nothing with: an outcome of an episode already rewarded.
        if isinstance(e, EpisodeFinished):
            assert e.episode_id in rewarded, r
        else:
            assert isinstance(e, JobSucceeded | JobFailed) and owner.get(e.job_id) in rewarded, r
    ids = sorted({e for r in prefix if isinstance(e := getattr(r.event, "episode_id", None), str) and e})
    unrewarded = [e for e in ids if e not in rewarded]
    assert histories(state, unrewarded) == episode_histories(prefix, unrewarded)
    return kept, unrewarded


def test_at_the_end_of_the_run_everything_left_is_rewarded(records: list[Recorded]) -> None:
    kept, _ = _check(records)
    assert any(r.event.type == "baseline.frozen" for r in kept)  # baselines are always kept


@pytest.mark.parametrize("cut", [0.3, 0.55, 0.8])
def test_mid_run_the_unrewarded_outcomes_and_histories_are_kept(records: list[Recorded], cut: float) -> None:
    _kept, unrewarded = _check(records[: int(len(records) * cut)])
    assert unrewarded  # episodes in flight at the cut: the comparison of histories is not vacuous


def test_an_outcome_a_crash_left_unrewarded_is_kept(records: list[Recorded]) -> None:
    # Cut right after a job's outcome whose episode's reward comes later: the crash window the catch-up is for.
    queued = {r.event.job_id: r.event.episode_id for r in records if isinstance(r.event, JobQueued)}
    rewarded_at = {r.event.episode_id: r.seq for r in records if isinstance(r.event, RewardComputed)}
    outcome = next(
        r
        for r in records
        if isinstance(r.event, JobSucceeded) and rewarded_at.get(queued.get(r.event.job_id, ""), -1) > r.seq
    )
    kept, _ = _check(records[: outcome.seq + 1])
    assert outcome in kept
