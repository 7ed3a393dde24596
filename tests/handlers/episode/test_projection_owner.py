"""The episodes projection finds a job's multi-job episode through its index, with the same result as a scan.

The index lives on the projection, outside the state: these check that a fold through it ends in the state a
scan of every episode (``owner_of``) gives, whatever the order of submissions, progress and outcomes, and across
a snapshot (a state object the projection has not seen, decoded from the state's own encoding).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from events import EpisodeJobSubmitted, EpisodeStarted, EventBody, JobFailed, JobProgressed, JobSucceeded, Recorded
from handlers.episode.projection import EpisodesProjection, EpisodeState, owner_of


class ScanningEpisodes(EpisodesProjection):
    """The reference: every lookup scans every episode (what the projection did before its index)."""

    def owner(self, s: dict[str, EpisodeState], job_id: str) -> EpisodeState | None:
        return owner_of(s, job_id)


EPISODES = [f"ep{i}" for i in range(4)]
JOBS = [f"{ep}-job-{k}" for ep in EPISODES for k in range(3)] + ["job-ep0", "job-unknown"]


def _body(kind: int, job: str, n: int) -> EventBody:
    episode = job.split("-job-")[0] if "-job-" in job else "ep0"
    if kind == 0 and "-job-" in job:
        return EpisodeJobSubmitted(episode_id=episode, job_id=job, index=int(job[-1]), bundle="b" * 64)
    if kind == 1:
        return JobSucceeded(job_id=job, pre=0.1, post=0.2 + n / 100, train_seconds=1.0)
    if kind == 2:
        return JobFailed(job_id=job, reason="oom", detail=f"d{n}")
    return JobProgressed(job_id=job, step=n % 5, phase="train", reward=n / 10, total_steps=5)


def _fold(p: EpisodesProjection, state: Any, bodies: list[EventBody], start: int) -> Any:
    for i, body in enumerate(bodies, start):
        state = p.apply(state, Recorded(i, float(i), body))
    return state


events = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(JOBS), st.integers(0, 99)), max_size=60)


@given(events, events)
def test_the_index_gives_the_scans_state_across_a_snapshot(before: list[Any], after: list[Any]) -> None:
    opening = [EpisodeStarted(episode_id=ep, task_id="t", family="calc_chain", policy="p") for ep in EPISODES]
    first = opening + [_body(*x) for x in before]
    then = [_body(*x) for x in after]
    indexed, scanning = EpisodesProjection(), ScanningEpisodes()
    state = _fold(indexed, indexed.initial(), first, 0)
    reference = _fold(scanning, scanning.initial(), first, 0)
    assert indexed.encode_state(state) == scanning.encode_state(reference)
    restored = indexed.decode_state(indexed.encode_state(state))  # a snapshot: a state object not seen before
    state = _fold(indexed, restored, then, len(first))
    reference = _fold(scanning, reference, then, len(first))
    assert indexed.encode_state(state) == scanning.encode_state(reference)


def test_progress_and_outcomes_reach_a_multi_job_episodes_job_and_skip_a_one_shot_job() -> None:
    p = EpisodesProjection()
    opening = [EpisodeStarted(episode_id=ep, task_id="t", family="calc_chain", policy="p") for ep in EPISODES]
    state = _fold(p, p.initial(), [*opening, _body(0, "ep2-job-1", 0), _body(3, "ep2-job-1", 3)], 0)
    assert state["ep2"].jobs["ep2-job-1"].step == 3  # found through the index
    restored = p.decode_state(p.encode_state(state))
    state = _fold(p, restored, [_body(1, "ep2-job-1", 7), _body(1, "job-ep0", 7)], 10)
    assert state["ep2"].jobs["ep2-job-1"].status == "succeeded"  # found after a snapshot too
    assert all(not ep.jobs for name, ep in state.items() if name != "ep2")  # a one-shot job touched nothing
