"""The dispatcher's job effect: run one attempt of a job on its pod's agent and record how it ended.

The attempt is the request ``job.assigned(key)``. The task submits the bundle (idempotent by job id, so after
a crash it finds the run already going or finished instead of starting another), follows the agent's event
stream from the last cursor in the log (so no progress is recorded twice), fetches the result document into
the blob store, and emits the outcome with the attempt's key. When the stream says ``eval_needed`` (the job's
training has ended and its scoring waits), it sends the family's hidden eval package, built here under the
engine's key: a pod never holds the hidden set before its training is over, nor builds it itself.
If the pod dies under it, the pod is recorded lost and the attempt ends as ``job.requeued`` (or
``job.failed`` once the attempts are spent). A job whose cancel was requested (``job.cancel_requested``) is
stopped on its pod and fails as ``cancelled``; one still waiting for a pod fails at once (:func:`end_cancelled`).
Every outcome is emitted only if the attempt is still the job's open one: a check and emit with no await.
"""

from __future__ import annotations

import hashlib

import anyio
import msgspec
import structlog

from engine.blobs import BlobCorrupted
from events import EventBody, JobFailed, JobProgressed, JobStarted, JobStoppedEarly, JobSucceeded
from handlers.fleet.context import DispatchContext
from handlers.fleet.pod_effects import lose_pod, pod_dead
from handlers.fleet.policy import attempt_lost
from handlers.fleet.queue import CANCELLED, WAITING, JobEntry
from handlers.ports.pod_agent import (
    EVAL_NEEDED,
    AgentError,
    AgentEvalRefused,
    AgentJobUnknown,
    AgentNotFinished,
    AgentResult,
    AgentUnreachable,
    JobSubmission,
)

__all__ = ["end_attempt_lost", "end_cancelled", "run_attempt"]

log = structlog.get_logger("handlers.fleet.dispatcher")


def _still_open(ctx: DispatchContext, job_id: str, key: str) -> JobEntry | None:
    job = ctx.queue().jobs.get(job_id)
    return job if job is not None and job.key == key and job.status in ("assigned", "running") else None


async def end_attempt_lost(ctx: DispatchContext, job_id: str, key: str, reason: str) -> None:
    """The attempt's pod is gone: requeue the job, or fail it when its attempts are spent."""

    def decide() -> EventBody | None:
        job = ctx.queue().jobs.get(job_id)
        return None if job is None else attempt_lost(job, key, reason, ctx.config)

    rec = await ctx.emit_if(decide)
    if rec is not None:
        log.warning(rec.event.type, job_id=job_id, reason=reason)


async def end_cancelled(ctx: DispatchContext) -> None:
    """Fail every waiting job whose cancel was requested: it is never assigned (an active one is stopped on its
    pod by its attempt's task, :func:`run_attempt`)."""
    for job_id in list(ctx.queue().cancels):

        def decide(job_id: str = job_id) -> JobFailed | None:
            queue = ctx.queue()
            job, why = queue.jobs.get(job_id), queue.cancels.get(job_id)
            if job is None or why is None or job.status not in WAITING:
                return None
            return JobFailed(key="", job_id=job_id, reason=CANCELLED, detail=why)

        if await ctx.emit_if(decide) is not None:
            log.info("job.cancelled", job_id=job_id, waiting=True)


async def _emit_if_open(ctx: DispatchContext, job_id: str, key: str, body: EventBody) -> None:
    """Emit ``body`` only while ``key`` is the job's open attempt (checked and emitted with no await)."""
    await ctx.emit_if(lambda: body if _still_open(ctx, job_id, key) is not None else None)


def _outcome_of(job: JobEntry, res: AgentResult, blob: str) -> EventBody:
    r = res.result
    timings = {**res.timings, **{f"trainer.{k}": v for k, v in r.timings.items()}}
    if r.ok and r.pre is not None and r.post is not None:
        return JobSucceeded(
            key=job.key,
            job_id=job.job_id,
            pre=r.pre,
            post=r.post,
            train_seconds=r.train_seconds,
            timings=timings,
            result_blob=blob,
            pod_id=job.pod_id,
            attempt=job.attempts,
            metrics={**r.metrics, **({"eval_n": float(r.eval_n)} if r.eval_n else {})},
        )
    reason = r.failure or ("scoring_error" if r.ok else "trainer_crash")
    detail = r.detail if not r.ok else "the trainer reported success without pre and post scores"
    return JobFailed(
        key=job.key,
        job_id=job.job_id,
        reason=reason,
        detail=detail[:2000],
        result_blob=blob,
        pod_id=job.pod_id,
        attempt=job.attempts,
    )


async def run_attempt(ctx: DispatchContext, job_id: str) -> None:
    """Run the open attempt of ``job_id`` to its outcome (or until the attempt is no longer open)."""
    job = ctx.queue().jobs[job_id]
    key, pod_id = job.key, job.pod_id
    pod = ctx.fleet().pods[pod_id]
    url, token = pod.url, ctx.token(pod_id)
    try:
        bundle = await ctx.ports.blobs.aget(job.bundle)
    except (OSError, ValueError, BlobCorrupted) as exc:
        detail = f"bundle {job.bundle[:16]}: {type(exc).__name__}: {exc}"
        await _emit_if_open(
            ctx, job_id, key, JobFailed(key=key, job_id=job_id, reason="bundle_unreadable", detail=detail)
        )
        return
    sub = JobSubmission(
        job_id=job_id,
        family=job.family,
        attempt=job.attempts,
        time_budget_s=job.time_budget_s,
        bundle_sha256=hashlib.sha256(bundle).hexdigest(),
    )
    deadline = ctx.now() + job.time_budget_s + ctx.config.job_grace_s if job.time_budget_s > 0 else None
    cursor, submitted = job.cursor, False
    unreachable_since: float | None = None
    backoff = 0.05
    while _still_open(ctx, job_id, key) is not None:
        why = ctx.queue().cancels.get(job_id)
        if why is not None:
            # Nobody wants the result: stop it on the pod (the agent's cancel returns once the run has ended, so
            # the pod is free for the next job), then end the attempt, which frees the pod in the fleet too.
            await _cancel_quietly(ctx, url, token, job_id)
            failed = JobFailed(key=key, job_id=job_id, reason=CANCELLED, detail=why, pod_id=pod_id, attempt=sub.attempt)
            await _emit_if_open(ctx, job_id, key, failed)
            log.info("job.cancelled", job_id=job_id, pod_id=pod_id)
            return
        try:
            if not submitted:
                await ctx.ports.agent.submit(url, token, sub, bundle)
                submitted = True

                def started() -> JobStarted | None:
                    j = _still_open(ctx, job_id, key)
                    if j is None or j.status != "assigned":
                        return None
                    return JobStarted(job_id=job_id, pod_id=pod_id, attempt=sub.attempt)

                await ctx.emit_if(started)
            page = await ctx.ports.agent.events(url, token, job_id, cursor, ctx.config.poll_wait_s)
            unreachable_since, backoff = None, 0.05
            ctx.last_ok[pod_id] = ctx.now()
            for ev in page.events:
                if ev.kind == EVAL_NEEDED:
                    await _send_eval(ctx, url, token, job_id, job.family)
                    continue
                if ev.kind != "progress":
                    continue
                body = JobProgressed(
                    job_id=job_id,
                    step=ev.step,
                    reward=ev.reward,
                    loss=ev.loss,
                    phase=ev.phase,
                    total_steps=ev.total_steps,
                    cursor=ev.seq,
                    attempt=sub.attempt,
                )
                await _emit_if_open(ctx, job_id, key, body)
            cursor = page.next_cursor
            if page.done:
                res = await ctx.ports.agent.result(url, token, job_id)
                blob = await ctx.ports.blobs.aput(msgspec.json.encode(res))
                current = _still_open(ctx, job_id, key)
                if current is not None:
                    if res.result.stopped_early:
                        # Said before the outcome, so no reader ever sees a cut-short job's scores as the full job's.
                        stopped = JobStoppedEarly(
                            job_id=job_id,
                            steps_done=res.result.steps_done,
                            steps_total=res.result.steps_total,
                            reason=res.result.stop_reason or "unstated",
                            attempt=sub.attempt,
                        )
                        await _emit_if_open(ctx, job_id, key, stopped)
                    await _emit_if_open(ctx, job_id, key, _outcome_of(current, res, blob))
                    log.info("job.finished", job_id=job_id, state=res.state, pod_id=pod_id)
                return
            if deadline is not None and ctx.now() > deadline:
                await _cancel_quietly(ctx, url, token, job_id)
                detail = f"no result {ctx.config.job_grace_s:g} s past its {job.time_budget_s:g} s budget"
                await _emit_if_open(
                    ctx, job_id, key, JobFailed(key=key, job_id=job_id, reason="timeout", detail=detail)
                )
                return
        except AgentJobUnknown:
            # The agent lost the job (it restarted): the run is gone with it, so submit the attempt afresh.
            submitted, cursor = False, 0
        except AgentNotFinished:
            await anyio.sleep(backoff)
        except AgentUnreachable as exc:
            unreachable_since = unreachable_since if unreachable_since is not None else ctx.now()
            reason = await pod_dead(ctx, ctx.fleet().pods[pod_id], unreachable_since)
            if reason is not None:
                await lose_pod(ctx, pod_id, reason)
                await end_attempt_lost(ctx, job_id, key, f"pod {pod_id} lost: {reason}")
                return
            log.info("job.agent_unreachable", job_id=job_id, pod_id=pod_id, error=str(exc))
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
        except AgentError as exc:
            # Auth refused, a conflicting bundle, busy with another job: this pod cannot run the attempt.
            await lose_pod(ctx, pod_id, f"agent refused the job: {exc}"[:300])
            await end_attempt_lost(ctx, job_id, key, f"pod {pod_id} unusable: {exc}"[:300])
            return


async def _send_eval(ctx: DispatchContext, url: str, token: str, job_id: str, family: str) -> None:
    """Deliver the hidden eval package the job asked for (an agent no longer waiting for it says so)."""
    if ctx.ports.eval_packages is None:
        log.warning("job.eval_unavailable", job_id=job_id, detail="no eval package source: its scoring will fail")
        return
    package = await ctx.ports.eval_packages(family)
    try:
        await ctx.ports.agent.send_eval(url, token, job_id, package)
    except AgentEvalRefused as exc:  # delivered before a controller restart, or the job has moved on
        log.info("job.eval_refused", job_id=job_id, detail=str(exc))
        return
    log.info("job.eval_sent", job_id=job_id, family=family, bytes=len(package))


async def _cancel_quietly(ctx: DispatchContext, url: str, token: str, job_id: str) -> None:
    try:
        await ctx.ports.agent.cancel(url, token, job_id)
    except AgentError as exc:
        log.info("job.cancel_failed", job_id=job_id, error=str(exc))
