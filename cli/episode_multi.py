"""``ait episode`` on a multi-job task spec: the episode and its jobs side by side, then every job's scores.

The job server (the local worker's dispatcher and one local pod, for the whole episode) runs the jobs in the
background as the agent queues them; the agent's ``wait_for_jobs`` sees the outcomes arrive. (Without a server,
as with tests' fakes, the job runner drains the queue whenever one of the episode's jobs has no outcome.) The
command ends when the episode has finished and every job has an outcome (or at once after the episode with
``--no-job``), and prints one line per job: its parent, hidden pre/post (the agent never saw these), dev pre/post
(what it saw), then the reward from the final job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from rich.console import Console

from cli.episode_wiring import EpisodeDeps, JobsNotDrained
from engine.runtime import Runtime
from handlers.episode.job_tools import DONE, agent_id
from handlers.episode.projection import EpisodesProjection, EpisodeState
from handlers.episode.runner import EpisodeRunner, EpisodeSetup
from handlers.reward.formula import explain
from handlers.reward.projection import RewardsProjection

if TYPE_CHECKING:
    from views.progress_lines import ProgressLines

__all__ = ["job_lines", "run_multi_job_episode"]


def _open_jobs(ep: EpisodeState) -> bool:
    return any(j.status not in DONE for j in ep.jobs.values())


async def _drain_jobs(rt: Runtime, deps: EpisodeDeps, episode_id: str) -> None:
    """Drain the queue whenever the episode has a job without an outcome, until it has finished with none."""
    assert deps.job_runner is not None

    def episode() -> EpisodeState | None:  # None until episode.started is in the log
        return rt.state(EpisodesProjection).get(episode_id)

    def has_open() -> bool:
        ep = episode()
        return ep is not None and _open_jobs(ep)

    def ended() -> bool:
        ep = episode()
        return ep is not None and ep.status != "running"

    while True:
        await rt.wait_until(lambda: has_open() or ended())
        if has_open():
            await deps.job_runner(rt, "")
        elif ended():
            return


def job_lines(ep: EpisodeState) -> list[str]:
    def num(v: float | None) -> str:
        return "  -  " if v is None else f"{v:.3f}"

    lines = []
    for job in ep.jobs.values():
        parent = ep.jobs.get(job.parent_job_id)
        tag = " (final)" if job.job_id == ep.final_job else ""
        lines.append(
            f"{agent_id(job)}{tag} ({job.job_id}){' after ' + agent_id(parent) if parent else ''}: {job.status}"
            f"{' (' + job.failure + ')' if job.failure else ''}; hidden pre {num(job.pre)} post {num(job.post)}; "
            f"dev pre {num(job.dev_pre)} post {num(job.dev_post)}; train {job.train_seconds:.1f}s"
        )
    return lines


async def run_multi_job_episode(
    rt: Runtime,
    runner: EpisodeRunner,
    setup: EpisodeSetup,
    deps: EpisodeDeps,
    ledger: Any,
    console: Console,
    *,
    no_job: bool,
    write_artifacts: Callable[[Path, Any, str, dict[str, str]], None],
    progress: ProgressLines,
) -> int:
    episode_id = setup.episode_id
    limits = setup.spec.episode
    assert limits is not None
    console.print(
        f"multi-job spec: up to {limits.max_jobs} jobs, job budget ${limits.budget_usd:g}, wall time {limits.wall_s}s"
    )
    drains = deps.job_runner is not None and not no_job
    # One dispatcher (one pod) serves every job of the episode as it is queued, and drains the rest when the
    # episode ends; without a server (tests' fakes), a drain runs whenever a job is open.
    server = deps.job_server(rt) if drains and deps.job_server is not None else contextlib.nullcontext()
    try:
        async with server, anyio.create_task_group() as tg:
            if drains and deps.job_server is None:
                tg.start_soon(_drain_jobs, rt, deps, episode_id)
            outcome = await runner.run(setup)
            await progress.caught_up(rt.next_seq - 1)  # the last job's lines before the episode's summary
            console.print(f"episode {outcome.status} after {outcome.turns} turns, {outcome.attempts} submission(s)")
            write_artifacts(rt.directory / "episodes" / episode_id, outcome, setup.spec.name, deps.ran_on)
            if not drains:
                tg.cancel_scope.cancel()
                console.print(f"jobs queued: {', '.join(outcome.jobs) or 'none'}; not run ({deps.ran_on.get('jobs')})")
    except JobsNotDrained as exc:  # the lines below say which jobs have no outcome
        console.print(f"[red]{exc}[/red]")
    ep = rt.state(EpisodesProjection)[episode_id]
    for line in job_lines(ep):
        console.print(line)
    if drains or not ep.jobs:
        with anyio.move_on_after(30):
            await rt.wait_until(lambda: episode_id in rt.state(RewardsProjection))
    if episode_id in rt.state(RewardsProjection):
        console.print(explain(rt.state(RewardsProjection)[episode_id]))
    elif drains:
        console.print("[red]no reward was computed (see the log: a job result without a frozen baseline?)[/red]")
        return 1
    spent = sum(r.usd for r in ledger.read() if r.run_id == rt.run_id)
    console.print(
        f"tokens: {ep.input_tokens} in ({ep.cached_input_tokens} cached), {ep.output_tokens} out; cost ${spent:.4f}"
    )
    console.print("ran on: " + ", ".join(f"{k}={v}" for k, v in deps.ran_on.items()))
    console.print(f"log: {rt.log.path}")
    return 0
