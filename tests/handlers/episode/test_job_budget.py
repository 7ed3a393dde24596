"""A multi-job episode's job budget under any interleaving of submissions, job ends and passing time.

A hypothesis state machine drives the real episodes projection with the events the runner records
(``episode.started``, ``episode.limits_set``, ``episode.job_submitted`` + ``job.queued`` when :func:`admit_job`
admits a job,
``job.succeeded`` / ``job.failed`` in any order, with jobs overlapping), and checks after every step: never more
than ``max_jobs`` jobs; committed money minus overrun within the budget; every admitted job's worst-case end
within the episode's wall time. A job that overruns its reservation is recorded in full, and then no new job fits.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from events import (
    EpisodeJobSubmitted,
    EpisodeLimitsSet,
    EpisodeStarted,
    EventBody,
    JobFailed,
    JobQueued,
    JobSucceeded,
    Recorded,
)
from handlers.episode.job_budget import admit_job, committed_usd, overrun_usd
from handlers.episode.projection import EpisodesProjection, EpisodeState

EP = "ep-0"


class JobBudgetMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.proj = EpisodesProjection()
        self.state: dict[str, EpisodeState] = self.proj.initial()
        self.seq = 0
        self.now = 1000.0
        self.admitted = 0
        self.refused = 0

    def _apply(self, body: EventBody) -> None:
        self.seq += 1
        self.state = self.proj.fold([Recorded(self.seq, self.now, body)], self.state)

    @property
    def ep(self) -> EpisodeState:
        return self.state[EP]

    @initialize(
        max_jobs=st.integers(1, 6),
        budget=st.sampled_from([0.0, 0.5, 1.0, 2.5]),
        wall=st.sampled_from([600, 900, 1800, 3600]),
        price=st.sampled_from([0.0, 0.0005, 0.001, 0.003]),
    )
    def start(self, max_jobs: int, budget: float, wall: int, price: float) -> None:
        self.price = price
        self._apply(
            EpisodeStarted(
                episode_id=EP,
                task_id="t",
                family="calc_chain",
                policy="p",
            )
        )
        self._apply(EpisodeLimitsSet(episode_id=EP, max_jobs=max_jobs, job_budget_usd=budget, wall_s=float(wall)))

    @rule(time_budget=st.sampled_from([60.0, 300.0, 600.0]))
    def submit(self, time_budget: float) -> None:
        admission = admit_job(self.ep, now=self.now, time_budget_s=time_budget, usd_per_s=self.price)
        if not admission.ok:
            self.refused += 1
            assert admission.reason
            return
        index = len(self.ep.jobs) + 1
        job_id = f"{EP}-job-{index}"
        self._apply(
            EpisodeJobSubmitted(
                episode_id=EP,
                job_id=job_id,
                index=index,
                bundle="b",
                attempt=index,
                reserve_usd=admission.reserve_usd,
                reserve_s=admission.reserve_s,
            )
        )
        self._apply(JobQueued(job_id=job_id, episode_id=EP, family="calc_chain", base_model="m", bundle="b"))
        self.admitted += 1

    def _open(self) -> list[str]:
        return [j.job_id for j in self.ep.jobs.values() if j.status not in ("succeeded", "failed")]

    @precondition(lambda self: bool(self._open()))
    @rule(data=st.data(), share=st.floats(0.0, 1.25), fail=st.booleans())
    def end_job(self, data: st.DataObject, share: float, fail: bool) -> None:
        job_id = data.draw(st.sampled_from(self._open()))
        job = self.ep.jobs[job_id]
        seconds = share * job.reserve_s  # > 1: ran past its time budget (an overrun, recorded in full)
        if fail:
            self._apply(JobFailed(job_id=job_id, reason="trainer_crash"))
        else:
            self._apply(
                JobSucceeded(job_id=job_id, pre=0.1, post=0.2, train_seconds=seconds, timings={"total": seconds})
            )

    @rule(seconds=st.sampled_from([1.0, 30.0, 300.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def never_over(self) -> None:
        if EP not in self.state:
            return
        ep = self.ep
        assert len(ep.jobs) <= ep.max_jobs
        assert committed_usd(ep, self.price) - overrun_usd(ep, self.price) <= ep.job_budget_usd + 1e-9
        for job in ep.jobs.values():
            assert job.submitted_ts + job.reserve_s <= ep.started_ts + ep.wall_s + 1e-9


TestJobBudget = JobBudgetMachine.TestCase
TestJobBudget.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_the_machine_reaches_both_admission_and_refusal() -> None:
    """The invariant is not vacuous: the same rules admit jobs and refuse them."""
    m = JobBudgetMachine()
    m.start(max_jobs=2, budget=1.0, wall=3600, price=0.001)
    m.submit(600.0)  # $0.60 reserved
    m.submit(600.0)  # $1.20 would pass the $1 budget: refused
    assert (m.admitted, m.refused) == (1, 1)
    job = m.ep.jobs[f"{EP}-job-1"]
    m._apply(JobSucceeded(job_id=job.job_id, pre=0.1, post=0.2, train_seconds=100.0, timings={"total": 100.0}))
    m.submit(600.0)  # job-1 settled at $0.10: $0.70 fits
    m.submit(60.0)  # max_jobs reached
    assert (m.admitted, m.refused) == (2, 2)
    m.never_over()
