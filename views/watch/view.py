"""The dashboard's view model: a pure function from the folded projection states to plain data.

No terminal, no clock: "now" is the time of the last record read (``last_ts``), so a finished run and a replay
show the same numbers, and open spans (a pod idle right now) are measured up to the log's last word. The
live loop passes ``wall_now`` only for the header's "last event N s ago".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from families import HELD_OUT_FAMILIES
from handlers.budget.rules import BudgetState
from handlers.episode.projection import EpisodeState
from handlers.fleet.projection import FleetState
from handlers.fleet.queue import ACTIVE, QueueState
from handlers.reward.projection import breakdown
from views.watch.errors import ErrorsState
from views.watch.jobs import JobPhase
from views.watch.outer import BatchProgress, OuterState, in_order
from views.watch.podtime import PodTimeState, gpu_time

__all__ = [
    "BudgetRow",
    "DashboardView",
    "EpisodeCounts",
    "ErrorRow",
    "FleetRow",
    "JobRow",
    "StepRow",
    "build_view",
    "is_holdout",
]

_MICROS = 1_000_000


class StepRow(msgspec.Struct, frozen=True, kw_only=True):
    """One outer step: its batch's progress and the mean reward with its weighted parts so far."""

    step: int
    expected: int
    started: int
    rewarded: int
    state: str  # running | collected | trained; open: neither, in a finished run (a later resume continues it)
    reward: float | None = None
    validation: float | None = None  # mean of w_validation * validation
    quality: float | None = None
    speed: float | None = None
    penalty: float | None = None  # mean no-submission penalty


class EpisodeCounts(msgspec.Struct, frozen=True, kw_only=True):
    started: int = 0
    running: int = 0
    validated: int = 0
    rejected: int = 0
    no_submission: int = 0
    budget_refused: int = 0
    error: int = 0
    holdout: int = 0  # of the above, episodes of a holdout arm
    holdout_running: int = 0


class JobRow(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    family: str
    model: str
    pod: str
    status: str
    phase: str
    step: int
    total_steps: int
    elapsed_s: float | None
    reward: float | None


class FleetRow(msgspec.Struct, frozen=True, kw_only=True):
    gpu: str
    booting: int
    available: int  # ready or idle
    busy: int
    lost: int
    ended: int  # terminating or gone
    idle_s: float
    busy_s: float
    usd_per_hour: float  # of the live pods together
    charged_usd: float


class BudgetRow(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # run | global | max episode (the episode closest to its cap)
    spent_usd: float
    reserved_usd: float
    cap_usd: float | None


class ErrorRow(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    ts: float
    kind: str
    subject: str
    message: str


class DashboardView(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    status: str
    unsafe_sandbox: str = ""  # the run's --unsafe-no-sandbox opt-in, if any
    events: int
    first_ts: float | None
    last_ts: float | None
    age_s: float | None  # wall seconds since the last record (live only)
    step: int
    planned_steps: int
    sampler_version: int
    lora_steps: int
    stale_discarded: int
    batch: StepRow | None
    steps: list[StepRow]
    reward_trend: list[float]  # mean reward of every step with a reward, in step order
    episodes: EpisodeCounts
    jobs: dict[str, int]
    active_jobs: list[JobRow]
    fleet: list[FleetRow]
    stockouts: list[str]  # GPU types out of stock at their last try
    provision_failures: dict[str, int]  # failure kind -> count
    gpu_refusals: int  # GPU-time reservations the budget refused
    last_gpu_refusal: str
    budget: list[BudgetRow]
    spend_by_kind: dict[str, float]
    refusals: int
    errors: list[ErrorRow]
    error_counts: dict[str, int]


def is_holdout(ep: EpisodeState) -> bool:
    """An episode of a holdout arm: a held-out family, or a group the outer loop marks ``holdout...``."""
    return ep.family in HELD_OUT_FAMILIES or ep.group_id.startswith("holdout")


def _step_row(
    b: BatchProgress, rewards: Mapping[str, Any], episodes: Mapping[str, EpisodeState], live: bool = True
) -> StepRow:
    got = [rewards[e] for e in b.episodes if e in rewards]
    # In a finished run nothing runs: a batch neither collected nor trained waits for a later `ait resume`.
    state = "trained" if b.trained else "collected" if b.collected else "running" if live else "open"
    started = sum(1 for e in b.episodes if e in episodes)
    if not got:
        return StepRow(step=b.step, expected=b.expected, started=started, rewarded=0, state=state)
    bd = breakdown(got)
    return StepRow(
        step=b.step,
        expected=b.expected,
        started=started,
        rewarded=len(got),
        state=state,
        reward=bd.reward,
        validation=bd.validation,
        quality=bd.quality,
        speed=bd.speed,
        penalty=bd.penalty,
    )


def _episodes(episodes: Mapping[str, EpisodeState]) -> EpisodeCounts:
    counts: dict[str, int] = {}
    holdout = holdout_running = 0
    for ep in episodes.values():
        counts[ep.status] = counts.get(ep.status, 0) + 1
        if is_holdout(ep):
            holdout += 1
            holdout_running += ep.status == "running"
    return EpisodeCounts(
        started=len(episodes),
        running=counts.get("running", 0),
        validated=counts.get("validated", 0),
        rejected=counts.get("rejected", 0),
        no_submission=counts.get("no_submission", 0),
        budget_refused=counts.get("budget_refused", 0),
        error=counts.get("error", 0),
        holdout=holdout,
        holdout_running=holdout_running,
    )


def _jobs(queue: QueueState, phases: Mapping[str, JobPhase], now: float | None, limit: int) -> list[JobRow]:
    rows = []
    for job in sorted((j for j in queue.jobs.values() if j.status in ACTIVE), key=lambda j: (j.order, j.job_id)):
        ph = phases.get(job.job_id)
        started = ph.started_ts if ph is not None else 0.0
        rows.append(
            JobRow(
                job_id=job.job_id,
                family=job.family,
                model=job.base_model,
                pod=job.pod_id,
                status=job.status,
                phase=ph.phase if ph is not None else "assigned",
                step=ph.step if ph is not None else 0,
                total_steps=ph.total_steps if ph is not None else 0,
                elapsed_s=(now - started) if (now is not None and started) else None,
                reward=ph.reward if ph is not None else None,
            )
        )
    return rows[:limit]


def _fleet(fleet: FleetState, times: PodTimeState, now: float | None) -> list[FleetRow]:
    spans = gpu_time(times, now if now is not None else 0.0)
    groups: dict[str, list[Any]] = {}
    for pod in fleet.pods.values():
        groups.setdefault(pod.gpu_type or "(unknown)", []).append(pod)
    rows = []
    for gpu in sorted(groups):
        pods = groups[gpu]

        def n(*statuses: str, pods: list[Any] = pods) -> int:
            return sum(1 for p in pods if p.status in statuses)

        span = spans.get(gpu)
        rows.append(
            FleetRow(
                gpu=gpu,
                booting=n("requested", "provisioning"),
                available=n("ready", "idle"),
                busy=n("busy"),
                lost=n("lost"),
                ended=n("terminating", "gone"),
                idle_s=span.idle_s if span else 0.0,
                busy_s=span.busy_s if span else 0.0,
                usd_per_hour=sum(p.usd_per_hour for p in pods if p.status in ("provisioning", "ready", "busy", "idle")),
                charged_usd=sum(p.charged_usd for p in pods),
            )
        )
    return rows


def _budget(b: BudgetState) -> list[BudgetRow]:
    def usd(micros: int | None) -> float | None:
        return None if micros is None else micros / _MICROS

    rows = [
        BudgetRow(name="run", spent_usd=b.settled / _MICROS, reserved_usd=b.reserved / _MICROS, cap_usd=usd(b.run_cap)),
        BudgetRow(
            name="global",
            spent_usd=(b.global_before + b.settled) / _MICROS,
            reserved_usd=b.reserved / _MICROS,
            cap_usd=usd(b.global_cap),
        ),
    ]
    if b.episodes:
        top = max(b.episodes.values(), key=lambda e: e.settled + e.reserved)
        rows.append(
            BudgetRow(
                name="max episode",
                spent_usd=top.settled / _MICROS,
                reserved_usd=top.reserved / _MICROS,
                cap_usd=usd(b.episode_cap),
            )
        )
    return rows


def build_view(
    states: Mapping[str, Any],
    *,
    events: int,
    first_ts: float | None = None,
    last_ts: float | None = None,
    wall_now: float | None = None,
    max_steps: int = 8,
    max_errors: int = 8,
    max_jobs: int = 8,
) -> DashboardView:
    """Everything the dashboard shows, from the states of :func:`.folder.watch_projections`."""
    run = states["run"]
    outer: OuterState = states["outer"]
    episodes: dict[str, EpisodeState] = states["episodes"]
    rewards = states["rewards"]
    queue: QueueState = states["queue"]
    fleet: FleetState = states["fleet"]
    budget: BudgetState = states["budget"]
    errs: ErrorsState = states["errors"]
    live = not run.status.startswith("finished:")
    rows = [_step_row(b, rewards, episodes, live) for b in in_order(outer)]
    return DashboardView(
        run_id=run.run_id,
        status=run.status,
        unsafe_sandbox=run.unsafe_sandbox,
        events=events,
        first_ts=first_ts,
        last_ts=last_ts,
        age_s=(wall_now - last_ts) if (wall_now is not None and last_ts is not None) else None,
        step=outer.last_step,
        planned_steps=outer.planned_steps,
        sampler_version=outer.sampler_version,
        lora_steps=outer.lora_steps,
        stale_discarded=outer.stale_discarded,
        batch=rows[-1] if rows else None,
        steps=rows[-max_steps:],
        reward_trend=[r.reward for r in rows if r.reward is not None],
        episodes=_episodes(episodes),
        jobs=dict(sorted(queue.counts.items())),
        active_jobs=_jobs(queue, states["job_phases"], last_ts, max_jobs),
        fleet=_fleet(fleet, states["pod_time"], last_ts),
        stockouts=sorted(fleet.stockouts),
        provision_failures=dict(sorted(fleet.failures.items())),
        gpu_refusals=fleet.budget_refusals,
        last_gpu_refusal=fleet.last_refusal,
        budget=_budget(budget),
        spend_by_kind={k: v / _MICROS for k, v in sorted(budget.settled_by_kind.items())},
        refusals=budget.refusals,
        errors=[
            ErrorRow(seq=e.seq, ts=e.ts, kind=e.kind, subject=e.subject, message=e.message)
            for e in errs.recent[-max_errors:]
        ],
        error_counts=dict(sorted(errs.counts.items())),
    )
