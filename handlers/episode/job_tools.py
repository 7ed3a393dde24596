"""What the job tools of a multi-job episode tell the agent about its jobs, read from the episodes projection.

The agent sees a job's phase, step, training curve (reward and loss of its own env's rollouts) and its score on
the family's *dev* split before and after training. It never sees a hidden-eval score: these functions read only
``EpisodeJob`` fields that cannot hold one (``pre`` / ``post`` are left alone, and the projection keeps no
progress reward from the scoring phases), and a job id that is not this episode's is refused like an unknown one.
"""

from __future__ import annotations

from handlers.episode.projection import EpisodeJob, EpisodeState

__all__ = ["DONE", "agent_id", "job_result_text", "job_status_text", "jobs_summary", "lookup"]

DONE = ("succeeded", "failed")
_CURVE_POINTS = 50  # a longer curve is thinned to about this many points (the last step always shown)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def agent_id(job: EpisodeJob) -> str:
    """The id the agent knows a job by: ``job-<index>``, local to its episode (the run's id is never shown)."""
    return f"job-{job.index}"


def lookup(ep: EpisodeState, job_id: str) -> EpisodeJob | str:
    """The episode's job named ``job-<index>``, or the message for any other id: an id of another episode's
    job (or the run-wide id of its own) names nothing here."""
    job = next((j for j in ep.jobs.values() if agent_id(j) == job_id), None)
    if job is None:
        known = ", ".join(agent_id(j) for j in ep.jobs.values()) or "none yet"
        return f"error: no job {job_id!r} in this episode (your jobs: {known})"
    return job


def _phase(job: EpisodeJob) -> str:
    return job.status if job.status in DONE else (job.phase or job.status)


def job_status_text(ep: EpisodeState, job_id: str) -> str:
    job = lookup(ep, job_id)
    if isinstance(job, str):
        return job
    lines = [f"{agent_id(job)}: {_phase(job)}"]
    if job.total_steps or job.step:
        lines.append(f"step {job.step} of {job.total_steps or '?'}")
    recent = [p.reward for p in job.curve[-5:] if p.reward is not None]
    if recent:
        lines.append("recent training reward: " + ", ".join(f"{r:.3f}" for r in recent))
    if job.status == "failed":
        lines.append(f"failed: {job.failure}")
    return "\n".join(lines)


def job_result_text(ep: EpisodeState, job_id: str) -> str:
    job = lookup(ep, job_id)
    if isinstance(job, str):
        return job
    if job.status not in DONE:
        return f"{agent_id(job)} has not finished ({_phase(job)}); call wait_for_jobs or job_status"
    lines = [f"{agent_id(job)}: {job.status}" + (f" ({job.failure}: {job.detail})" if job.failure else "")]
    if job.status == "succeeded":
        lines.append(f"dev-split score: before training {_num(job.dev_pre)}, after training {_num(job.dev_post)}")
        lines.append(f"training took {job.train_seconds:.1f}s")
    points = job.curve
    if len(points) > _CURVE_POINTS:
        stride = -(-len(points) // _CURVE_POINTS)
        points = [*points[:-1:stride], points[-1]]
    lines.append("training curve (step: reward, loss):")
    lines += [f"  {p.step}: {_num(p.reward)}, {_num(p.loss)}" for p in points] or ["  (no training steps recorded)"]
    return "\n".join(lines)


def jobs_summary(ep: EpisodeState, job_ids: list[str]) -> str:
    return "\n".join(job_status_text(ep, j) for j in job_ids) if job_ids else "you have no jobs yet"
