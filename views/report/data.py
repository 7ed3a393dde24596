"""The numbers of a run report, as plain data: per outer step, per job, the holdout arms, and run totals.

Built from the folded projections (:class:`views.watch.folder.RunFolder` plus :mod:`.accounts`) and, for
the agent's job choices, the job bundles in the blob store. Everything else the plots and the Markdown show is
read from here, so the two can never disagree.

Definitions (also stated in the report):

- an episode's *step* is the outer step whose ``batch.collected`` lists it; holdout episodes belong to no step;
- *validated rate*: validated episodes / episodes of the step; *job success*: succeeded / jobs that ended;
- a job's GPU cost is its attempts' time on their pods (assigned -> outcome) at each pod's hourly rate; pod time
  no job used (booting, idle) is in the run's GPU total but in no job's;
- a step's cost: its episodes' agent calls + its jobs' GPU cost + its optimizer step;
- a run without outer steps (``ait episode``) lists each episode with its reward and its job's curve instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import structlog

from engine.blobs import BlobStore
from engine.log import LogCorrupted
from engine.pick import first_record
from events import RewardComputed, RunStarted
from handlers.episode.projection import EpisodeState
from handlers.fleet.policy import gpu_seconds_usd, rung_label
from handlers.fleet.projection import FleetState
from handlers.fleet.queue import QueueState
from handlers.reward.projection import breakdown
from views.report.accounts import Accounts, AccountsProjection
from views.report.curves import JobCurve, JobCurvesProjection
from views.report.job_tree import job_tree_lines
from views.report.jobtoml import JobChoice, choice_of_bundle, choice_of_toml, toml_of_bundle
from views.report.replica import DEFAULT_GRID, Grid, GridError, ReplicaData, label_of_toml, load_grid, replica_data
from views.watch.folder import RunFolder
from views.watch.outer import in_order
from views.watch.podtime import gpu_time
from views.watch.view import is_holdout

__all__ = ["EpisodeDetail", "HoldoutRow", "JobStats", "ReportData", "StepStats", "collect", "step_stats"]

log = structlog.get_logger(__name__)


class StepStats(msgspec.Struct, frozen=True, kw_only=True):
    step: int
    episodes: int
    reward: float
    validation: float  # weighted parts of the mean reward
    quality: float
    speed: float
    penalty: float
    validated: int
    jobs: int  # jobs queued by the step's episodes
    jobs_ended: int
    jobs_succeeded: int
    models: dict[str, int]  # base model -> jobs
    configs_read: int  # jobs whose job.toml could be read
    adopters: int  # of those, jobs that moved at least one optional [prime_rl] key off its default
    keys: dict[str, int]  # adopted key -> jobs
    agent_usd: float
    gpu_usd: float
    training_usd: float
    lora: dict[str, float]

    @property
    def total_usd(self) -> float:
        return self.agent_usd + self.gpu_usd + self.training_usd


class JobStats(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    episode_id: str
    step: int  # 0: not in a collected batch (holdout, or still open)
    holdout: bool
    family: str
    model: str
    status: str
    reason: str
    attempts: int
    post: float | None
    uplift: float | None
    gpus: list[str]  # GPU types of its attempts
    gpu_seconds: float
    gpu_usd: float
    adopted: list[str] | None  # None: job.toml not readable


class HoldoutRow(msgspec.Struct, frozen=True, kw_only=True):
    sampler_version: int
    families: list[str]
    checkpoint: str  # the sampler path the arm ran
    outer_steps: int | None  # the outer step that produced it (0: the base model; None: unknown)
    episodes: int
    reward: float
    validated: int
    jobs: int
    jobs_succeeded: int
    worst: float


class ReportData(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    status: str
    seed: int
    events: int
    first_ts: float | None
    last_ts: float | None
    weights: tuple[float, float, float]  # w_validation, w_quality, w_speed of the recorded rewards
    steps: list[StepStats]
    jobs: list[JobStats]
    holdout: list[HoldoutRow]
    episodes_by_status: dict[str, int]
    unsafe_sandbox: str = ""  # the run's --unsafe-no-sandbox opt-in, if any (see run.sandbox_opted_out)
    outcomes: dict[str, int]
    spend_by_kind: dict[str, float]
    spend_usd: float
    gpu_hours: dict[str, tuple[float, float, float]]  # GPU -> (busy s, idle s, USD charged)
    failed_checks: dict[str, int]
    job_failures: dict[str, int]
    pods_lost: int
    requeues: int
    scored: list[RewardComputed]  # training episodes whose job was scored (post and uplift)
    inner_trainer: str = ""  # from run.wiring ("": a run recorded before it existed)
    learner_backend: str = ""
    provider: str = ""
    standin: bool = False  # inner scores made up (stand-in trainer / sim agents): nothing real was measured
    control: bool = False  # [backend] learn = false: the no-learning control (every step computed, none applied)
    capped: int = 0  # episodes ended by the run or global budget cap: left out of the GRPO batches
    unfinished: int = 0  # episodes started with no episode.finished in the log (in flight, or left open by its end)
    # Runs without outer steps (``ait episode``): each episode's reward with its job's curve, shown in full.
    episodes: list[EpisodeDetail] = []
    job_trees: list[str] = []  # markdown: each multi-job episode's job tree with diffs (views.report.job_tree)
    replica: ReplicaData | None = None  # the CPU replica's choices and arms (views.report.replica); None: not one


class EpisodeDetail(msgspec.Struct, frozen=True, kw_only=True):
    """One episode of a run without outer steps: its reward decomposition and its job's curve."""

    episode_id: str
    reward: RewardComputed | None
    job_id: str
    curve: JobCurve | None


def step_stats(
    step: int,
    episode_ids: Iterable[str],
    rewards: Mapping[str, RewardComputed],
    episodes: Mapping[str, EpisodeState],
    queue: QueueState,
    choices: Mapping[str, JobChoice | None],
    job_usd: Mapping[str, float],
    accounts: Accounts,
    lora: Mapping[str, float] | None = None,
) -> StepStats:
    """The statistics of one outer step over ``episode_ids`` (those of its batch)."""
    ids = [e for e in episode_ids if e in rewards]
    bd = breakdown(rewards[e] for e in ids)
    jobs = [queue.jobs[ep.job_id] for e in ids if (ep := episodes.get(e)) is not None and ep.job_id in queue.jobs]
    models: dict[str, int] = {}
    keys: dict[str, int] = {}
    read = adopters = 0
    for j in jobs:
        models[j.base_model] = models.get(j.base_model, 0) + 1
        choice = choices.get(j.job_id)
        if choice is None:
            continue
        read += 1
        adopters += bool(choice.adopted)
        for k in choice.adopted:
            keys[k] = keys.get(k, 0) + 1
    return StepStats(
        step=step,
        episodes=len(ids),
        reward=bd.reward,
        validation=bd.validation,
        quality=bd.quality,
        speed=bd.speed,
        penalty=bd.penalty,
        validated=sum(1 for e in ids if rewards[e].validated),
        jobs=len(jobs),
        jobs_ended=sum(1 for j in jobs if j.status in ("succeeded", "failed")),
        jobs_succeeded=sum(1 for j in jobs if j.status == "succeeded"),
        models=dict(sorted(models.items())),
        configs_read=read,
        adopters=adopters,
        keys=dict(sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))),
        agent_usd=sum(accounts.episode_usd.get(e, 0.0) for e in ids),
        gpu_usd=sum(job_usd.get(j.job_id, 0.0) for j in jobs),
        training_usd=accounts.training_usd.get(str(step), 0.0),
        lora=dict(lora or {}),
    )


def _choices(queue: QueueState, episodes: Mapping[str, EpisodeState], blobs: BlobStore) -> dict[str, JobChoice | None]:
    """Each job's choice from its bundle; failing that, from its episode's last job.toml; else None."""
    out: dict[str, JobChoice | None] = {}
    for job in sorted(queue.jobs.values(), key=lambda j: j.order):
        choice: JobChoice | None = None
        try:
            if job.bundle in blobs:
                choice = choice_of_bundle(blobs.get(job.bundle), f"bundle {job.bundle[:12]} of {job.job_id}")
            else:
                ep = episodes.get(job.episode_id)
                blob = ep.files.get("job.toml", "") if ep is not None else ""
                if blob and blob in blobs:
                    choice = choice_of_toml(blobs.get(blob).decode("utf-8"), f"{job.episode_id}:job.toml")
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("report.job_toml_unreadable", job_id=job.job_id, error=str(exc))
        out[job.job_id] = choice
    return out


def _job_gpu(accounts: Accounts, fleet: FleetState, now: float) -> dict[str, tuple[list[str], float, float]]:
    """Job id -> (GPUs, GPU-seconds, USD) over its attempts (a 2-GPU pod's attempt counts both GPUs)."""
    out: dict[str, tuple[list[str], float, float]] = {}
    for job_id, attempts in accounts.attempts.items():
        gpus: list[str] = []
        seconds = usd = 0.0
        for a in attempts:
            pod = fleet.pods.get(a.pod_id)
            s = max(0.0, (a.ended_ts or now) - a.assigned_ts)
            if pod is None:
                seconds += s
                continue
            gpu_s, cost = gpu_seconds_usd(pod, s)
            seconds += gpu_s
            usd += cost
            label = rung_label(pod.gpu_type, pod.gpu_count)
            if label not in gpus:
                gpus.append(label)
        out[job_id] = (gpus, seconds, usd)
    return out


def _holdout(
    episodes: Mapping[str, EpisodeState], rewards: Mapping[str, RewardComputed], queue: QueueState, accounts: Accounts
) -> list[HoldoutRow]:
    arms: dict[int, list[EpisodeState]] = {}
    for ep in episodes.values():
        if is_holdout(ep) and ep.episode_id in rewards:
            arms.setdefault(ep.sampler_version, []).append(ep)
    rows = []
    for version in sorted(arms):
        eps = arms[version]
        rs = [rewards[e.episode_id].reward for e in eps]
        path = accounts.sampler_paths.get(str(version), "")
        # Sampler version v holds the weights after v optimizer steps (version 0: the base model), whether the
        # log numbers its steps from 0 (handlers/training/step.py: step s publishes v = s + 1) or from 1.
        steps = version
        jobs = [queue.jobs[e.job_id] for e in eps if e.job_id in queue.jobs]
        rows.append(
            HoldoutRow(
                sampler_version=version,
                families=sorted({e.family for e in eps}),
                checkpoint=path or f"sampler v{version}",
                outer_steps=steps,
                episodes=len(eps),
                reward=sum(rs) / len(rs),
                validated=sum(1 for e in eps if rewards[e.episode_id].validated),
                jobs=len(jobs),
                jobs_succeeded=sum(1 for j in jobs if j.status == "succeeded"),
                worst=min(rs),
            )
        )
    return rows


def _labels(queue: QueueState, blobs: BlobStore) -> dict[str, str | None]:
    """Episode id -> the replica choice label of its (first) job's job.toml; None: not a replica choice."""
    out: dict[str, str | None] = {}
    for job in sorted(queue.jobs.values(), key=lambda j: j.order):
        if job.episode_id in out:
            continue
        try:  # a bundle that is missing, unreadable or not a tar is no replica choice
            text = toml_of_bundle(blobs.get(job.bundle), job.job_id) if job.bundle in blobs else ""
        except (ValueError, UnicodeDecodeError):
            text = ""
        out[job.episode_id] = label_of_toml(text) if text else None
    return out


def _grid(path: Path | None) -> tuple[Grid | None, str]:
    """The grid given (its errors raise), else the default one if it exists; and why there is none."""
    if path is not None:
        return load_grid(path), ""
    if DEFAULT_GRID.is_file():
        try:
            return load_grid(DEFAULT_GRID), ""
        except GridError as exc:
            return None, str(exc)
    return None, "no grid file (benchmarks/replica_grid.py writes examples/replica/grid.json; `ait report --grid`)"


def _is_control(log: Path) -> bool:
    """The run's header (its first record) says ``[backend] learn = false``: a control arm, whose learner backend
    applies no update (the wiring event names the backend only)."""
    try:
        header = first_record(log)
    except (OSError, LogCorrupted):
        return False
    if header is None or not isinstance(header.event, RunStarted):
        return False
    config = header.event.config.get("config")
    backend = config.get("backend") if isinstance(config, dict) else None
    return isinstance(backend, dict) and backend.get("learn") is False


def collect(run_dir: Path | str, *, folder: RunFolder | None = None, grid: Path | None = None) -> ReportData:
    """Read the run at ``run_dir`` (its events.jsonl and blobs/) into :class:`ReportData`; ``grid``: the replica's
    grid JSON (default ``examples/replica/grid.json`` when it exists; a given one that does not fit raises
    :class:`~views.report.replica.GridError`)."""
    root = Path(run_dir)
    if folder is None:
        folder = RunFolder(root / "events.jsonl", extra=[AccountsProjection(), JobCurvesProjection()])
        folder.catch_up()
    st: dict[str, Any] = folder.states
    episodes: dict[str, EpisodeState] = st["episodes"]
    rewards: dict[str, RewardComputed] = st["rewards"]
    queue: QueueState = st["queue"]
    fleet: FleetState = st["fleet"]
    accounts: Accounts = st["accounts"]
    outer = st["outer"]
    now = folder.last_ts or 0.0
    choices = _choices(queue, episodes, BlobStore(root / "blobs"))
    gpu = _job_gpu(accounts, fleet, now)
    job_usd = {j: v[2] for j, v in gpu.items()}
    steps = [
        step_stats(b.step, b.episodes, rewards, episodes, queue, choices, job_usd, accounts, b.metrics)
        for b in in_order(outer)
        if b.collected
    ]
    jobs = []
    for j in sorted(queue.jobs.values(), key=lambda j: j.order):
        ep = episodes.get(j.episode_id)
        rc = rewards.get(j.episode_id)
        choice = choices.get(j.job_id)
        gpus, seconds, usd = gpu.get(j.job_id, ([], 0.0, 0.0))
        jobs.append(
            JobStats(
                job_id=j.job_id,
                episode_id=j.episode_id,
                step=outer.episode_step.get(j.episode_id, 0),
                holdout=ep is not None and is_holdout(ep),
                family=j.family,
                model=j.base_model,
                status=j.status,
                reason=j.reason,
                attempts=j.attempts,
                post=j.post,
                uplift=rc.uplift if rc is not None else None,
                gpus=gpus,
                gpu_seconds=seconds,
                gpu_usd=usd,
                adopted=list(choice.adopted) if choice is not None else None,
            )
        )
    training = {e for s in steps for e in outer.batches[str(s.step)].episodes}
    any_reward = next(iter(rewards.values()), None)
    budget = st["budget"]
    hours = {
        g: (t.busy_s, t.idle_s, sum(p.charged_usd for p in fleet.pods.values() if p.gpu_type == g))
        for g, t in gpu_time(st["pod_time"], now).items()
    }
    errors = st["errors"]
    labels = _labels(queue, BlobStore(root / "blobs"))
    replica = None
    if any(v is not None for v in labels.values()):
        the_grid, grid_note = _grid(grid)
        replica = replica_data(
            [(s.step, outer.batches[str(s.step)].episodes) for s in steps],
            {e: r.reward for e, r in rewards.items()},
            labels,
            [(e.episode_id, e.family, e.sampler_version) for e in episodes.values() if is_holdout(e)],
            grid=the_grid,
            grid_note=grid_note,
            run_keys=accounts.eval_keys,
        )
    return ReportData(
        run_id=st["run"].run_id,
        status=st["run"].status,
        seed=st["run"].seed,
        events=folder.events,
        first_ts=folder.first_ts,
        last_ts=folder.last_ts,
        weights=(any_reward.w_validation, any_reward.w_quality, any_reward.w_speed) if any_reward else (0.0, 0.0, 0.0),
        steps=steps,
        jobs=jobs,
        holdout=_holdout(episodes, rewards, queue, accounts),
        episodes_by_status=dict(sorted(st["run"].episodes_finished.items())),
        unsafe_sandbox=st["run"].unsafe_sandbox,
        outcomes=breakdown(rewards.values()).outcomes,
        spend_by_kind={k: v / 1_000_000 for k, v in sorted(budget.settled_by_kind.items())},
        spend_usd=budget.settled / 1_000_000,
        gpu_hours=hours,
        failed_checks=dict(sorted(errors.failed_checks.items(), key=lambda kv: (-kv[1], kv[0]))),
        job_failures=dict(sorted(errors.job_failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        pods_lost=errors.counts.get("pod.lost", 0),
        requeues=errors.counts.get("job.requeued", 0),
        # A run without outer steps (an `ait episode` run) has no batches: every scored episode counts.
        scored=[r for e, r in sorted(rewards.items()) if (e in training or not steps) and r.outcome == "scored"],
        episodes=[] if steps else _details(episodes, rewards, st.get("job_curves", {})),
        inner_trainer=st["run"].inner_trainer,
        learner_backend=st["run"].learner_backend,
        provider=st["run"].provider,
        standin=st["run"].standin,
        control=_is_control(root / "events.jsonl"),
        capped=sum(1 for r in rewards.values() if r.budget_refused in ("run", "global")),
        unfinished=sum(1 for e in episodes.values() if e.status == "running"),
        job_trees=job_tree_lines(episodes, BlobStore(root / "blobs")),
        replica=replica,
    )


def _details(
    episodes: Mapping[str, EpisodeState], rewards: Mapping[str, RewardComputed], curves: Mapping[str, JobCurve]
) -> list[EpisodeDetail]:
    return [
        EpisodeDetail(
            episode_id=e,
            reward=rewards.get(e),
            job_id=ep.job_id,
            curve=curves.get(ep.job_id) if ep.job_id else None,
        )
        for e, ep in sorted(episodes.items())
    ]
