"""One episode, start to finish: the agent works in its workspace until it submits a valid job or runs out.

Reads top to bottom like the episode itself::

    episode.started, the initial workspace files
    repeat up to max_turns:
        reserve the call's worst-case cost -> ask the policy -> settle the real cost -> agent.turn_taken
        for each tool call: tool.called -> (workspace.file_written) -> tool.returned
            submit_job: submission.received -> probe -> submission.validated | submission.rejected (+ nudge)
    episode.finished (validated | rejected | no_submission | budget_refused | error)

A multi-job spec (``spec.episode.max_jobs > 1``, see :mod:`handlers.episode.job_budget`) changes three things:
a validated submission becomes a job at once (``episode.job_submitted`` + ``job.queued``, admitted within the
episode's job budget) and the agent keeps working; the job tools read the episode's jobs; and the episode ends
with ``finish(final_job_id)`` (``episode.final_chosen``, then ``episode.finished`` with status ``finished``), or
as ``no_final`` when the turns run out with jobs but no final one. ``max_attempts`` then bounds the *rejected*
submissions. Jobs keep running after the episode ends; the reward waits for all of them.

Everything the agent produced goes to the blob store first and into events by hash, so a workspace can be
rebuilt from the log at any point. Agent mistakes (bad tool calls, refused paths, failed checks) are
returned to the agent as tool results; only the budget, the turn cap or a policy failure end it early.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from engine.blobs import BlobStore
from engine.runtime import Runtime
from events import (
    AgentTurnTaken,
    EpisodeFinalChosen,
    EpisodeFinished,
    EpisodeJobSubmitted,
    EpisodeLimitsSet,
    EpisodeStarted,
    JobQueued,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
    ToolCalled,
    ToolReturned,
    WorkspaceFileWritten,
)
from families.spec import TaskSpec
from handlers.budget.prices import UnknownPrice
from handlers.budget.rules import BudgetGate, BudgetRefused
from handlers.episode.bundle import bundle_files, make_bundle
from handlers.episode.job_budget import admit_job
from handlers.episode.job_config import JobConfig, JobConfigError, load_job_config, parse_job_config
from handlers.episode.job_tools import DONE, agent_id, job_result_text, job_status_text, jobs_summary, lookup
from handlers.episode.projection import EpisodesProjection, EpisodeState
from handlers.episode.resume import NUDGE, PendingSubmit, ResumePoint
from handlers.episode.tools import FINISH, run_tool, tool_schemas
from handlers.episode.workspace import Workspace
from handlers.fleet.queue import QueueProjection, duration_estimate
from handlers.ports.policy import AgentPolicy, AgentReply, PolicyError, ToolCall
from handlers.ports.validator import ProbeReport, Validator, nudge

__all__ = ["EpisodeOutcome", "EpisodeRunner", "EpisodeSetup"]

log = structlog.get_logger(__name__)
_ENC = msgspec.json.Encoder()
_EVENT_CHARS = 4000  # a tool result's text in tool.returned; longer ones are kept whole in the blob store


def _job_or_none(path: Path) -> JobConfig | None:
    try:
        return load_job_config(path)
    except (JobConfigError, OSError):
        return None


@dataclass(frozen=True)
class EpisodeSetup:
    episode_id: str
    task_id: str
    spec: TaskSpec
    spec_json: bytes
    workspace: Path
    initial_files: Mapping[str, bytes]
    messages: list[dict[str, Any]]  # the opening system + user messages
    baselines: Mapping[str, float]
    max_turns: int = 40
    max_attempts: int = 3
    max_input_tokens: int = 64_000  # per call, for the worst-case reservation
    max_output_tokens: int = 4_096
    group_id: str = ""
    sampler_version: int = 0
    job_usd_per_s: float = 0.0  # a multi-job episode's job price (the fleet's GPU), for its job budget
    wait_cap_s: float = 600.0  # longest one wait_for_jobs call may block

    @property
    def multi(self) -> bool:
        return self.spec.episode is not None and self.spec.episode.max_jobs > 1

    @property
    def tools(self) -> list[dict[str, Any]]:
        return tool_schemas(self.multi)


@dataclass
class EpisodeOutcome:
    episode_id: str
    status: str
    attempts: int = 0
    parseable: bool = False
    job: JobConfig | None = None
    bundle: str = ""  # blob hash of the validated job bundle
    jobs: list[str] = field(default_factory=list)  # a multi-job episode's job ids, in submission order
    final_job: str = ""
    turns: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the whole conversation, as the agent saw it


class EpisodeRunner:
    def __init__(
        self,
        runtime: Runtime,
        blobs: BlobStore,
        policy: AgentPolicy,
        validator: Validator,
        gate: BudgetGate | None = None,
    ) -> None:
        self.rt = runtime
        self.blobs = blobs
        self.policy = policy
        self.validator = validator
        self.gate = gate

    async def run(self, setup: EpisodeSetup, resume: ResumePoint | None = None) -> EpisodeOutcome:
        """Run the episode; with ``resume``, continue it from where an interrupted process left it."""
        if resume is None:
            outcome, messages, nudged, pending = await self._start(setup), list(setup.messages), False, []
            workspace = Workspace(setup.workspace)
        else:
            outcome, workspace = await self._restore(setup, resume)
            messages, nudged, pending = list(resume.messages), resume.nudged, resume.pending
            if resume.finished is not None:
                outcome.status = resume.finished.status
                return outcome
        outcome.messages = messages
        try:
            for call in pending:  # the interrupted turn's calls that have no result yet
                result = await self._tool(setup, workspace, call.id, call.name, call.arguments, outcome, resume)
                messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result})
                if outcome.status != "running":
                    return await self._finish(outcome, "")
            if outcome.status != "running" or (resume is not None and resume.ended):
                return await self._finish(outcome, "")
            for _turn in range(outcome.turns, setup.max_turns):
                reply = await self._turn(setup, messages, outcome)
                messages.append(reply.message())
                if not reply.tool_calls:
                    if nudged:
                        break
                    nudged = True  # one reminder, then an agent that keeps talking ends the episode
                    messages.append({"role": "user", "content": NUDGE})
                    continue
                for call in reply.tool_calls:
                    result = await self._tool(setup, workspace, call.id, call.name, call.arguments, outcome)
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result})
                    if outcome.status != "running":
                        return await self._finish(outcome, "")
            if setup.multi and outcome.jobs:
                outcome.status = "no_final"
                return await self._finish(outcome, f"stopped after {outcome.turns} turns without calling finish")
            status = "rejected" if outcome.attempts else "no_submission"
            outcome.status = status
            return await self._finish(outcome, f"stopped after {outcome.turns} turns without a valid submission")
        except BudgetRefused as exc:
            outcome.status = "budget_refused"
            return await self._finish(outcome, str(exc))
        except PolicyError as exc:
            outcome.status = "error"
            return await self._finish(outcome, f"policy failed: {exc}")

    async def _start(self, setup: EpisodeSetup) -> EpisodeOutcome:
        ep = setup.episode_id
        prompt_blob = await self.blobs.aput(_ENC.encode({"messages": setup.messages, "tools": setup.tools}))
        limits = setup.spec.episode if setup.multi else None
        await self.rt.emit(
            EpisodeStarted(
                episode_id=ep,
                task_id=setup.task_id,
                family=setup.spec.family,
                policy=self.policy.name,
                sampler_version=setup.sampler_version,
                group_id=setup.group_id,
                spec=setup.spec.name,
                prompt_blob=prompt_blob,
                max_attempts=setup.max_attempts,
            )
        )
        if limits is not None:
            await self._set_limits(setup)
        workspace = Workspace(setup.workspace)
        setup.workspace.mkdir(parents=True, exist_ok=True)
        for path, data in sorted(setup.initial_files.items()):
            workspace.write(path, data.decode("utf-8"))
            await self._record_file(ep, path, data)
        return EpisodeOutcome(ep, "running")

    async def _restore(self, setup: EpisodeSetup, point: ResumePoint) -> tuple[EpisodeOutcome, Workspace]:
        """The workspace as it was before the interrupted calls, and the counters the log says."""
        if setup.workspace.exists():
            shutil.rmtree(setup.workspace)  # it may hold writes of the calls that will run again
        setup.workspace.mkdir(parents=True)
        workspace = Workspace(setup.workspace)
        for path, blob in sorted(point.files.items()):
            if blob:
                workspace.write(path, (await self.blobs.aget(blob)).decode("utf-8"))
        if point.turns == 0:  # interrupted while writing the initial files: write the rest
            for path, data in sorted(setup.initial_files.items()):
                if path not in point.files:
                    workspace.write(path, data.decode("utf-8"))
                    await self._record_file(setup.episode_id, path, data)
        outcome = EpisodeOutcome(
            setup.episode_id,
            "running",
            attempts=point.attempts,
            parseable=point.parseable,
            turns=point.turns,
            usage=dict(point.usage),
        )
        if setup.multi:
            if self._episode(setup).max_jobs <= 1:  # a crash right after episode.started
                await self._set_limits(setup)
            ep = self._episode(setup)
            outcome.jobs, outcome.final_job = list(ep.jobs), ep.final_job
            for job in ep.jobs.values():  # a crash between episode.job_submitted and job.queued: queue it now
                if not job.queued:
                    await self._queue(setup, job.job_id, job.bundle)
            if ep.final_job:
                outcome.status = "finished"
        elif point.validated is not None:
            outcome.status = "validated"
            outcome.bundle = point.validated.job_blob
            outcome.job = _job_or_none(setup.workspace / "job.toml")
        elif point.rejected_out and not outcome.jobs:
            outcome.status = "rejected"
        if hasattr(self.policy, "skip_to"):
            self.policy.skip_to(point.turns)  # a scripted or sampled policy resumes at this turn
        log.info("episode.resumed", episode_id=setup.episode_id, turns=point.turns, pending=len(point.pending))
        return outcome, workspace

    async def _turn(self, setup: EpisodeSetup, messages: list[dict[str, Any]], outcome: EpisodeOutcome) -> AgentReply:
        ep = setup.episode_id
        if self.gate is not None and self._priced():
            async with self.gate.llm_call(
                self.policy.model,
                max_input_tokens=setup.max_input_tokens,
                max_output_tokens=setup.max_output_tokens,
                kind="episode",
                ref=ep,
                episode_id=ep,
            ) as hold:
                reply = await self.policy.next_turn(messages, setup.tools)
                await hold.settle_llm(
                    input_tokens=reply.input_tokens,
                    cached_input_tokens=reply.cached_input_tokens,
                    output_tokens=reply.output_tokens,
                )
        else:
            reply = await self.policy.next_turn(messages, setup.tools)
        blob = await self.blobs.aput(_ENC.encode({"reply": reply.message(), "training": reply.training}))
        await self.rt.emit(
            AgentTurnTaken(
                episode_id=ep,
                turn=outcome.turns,
                blob=blob,
                input_tokens=reply.input_tokens,
                cached_input_tokens=reply.cached_input_tokens,
                output_tokens=reply.output_tokens,
                sampler_version=setup.sampler_version,
            )
        )
        outcome.turns += 1
        for k, v in (("input", reply.input_tokens), ("cached_input", reply.cached_input_tokens)):
            outcome.usage[k] = outcome.usage.get(k, 0) + v
        outcome.usage["output"] = outcome.usage.get("output", 0) + reply.output_tokens
        return reply

    def _priced(self) -> bool:
        """Whether this policy's calls go through the budget (an unpriced local policy costs nothing)."""
        if self.gate is None or self.gate.prices is None:
            return False
        try:
            self.gate.prices.model(self.policy.model)
        except UnknownPrice:
            return False
        return True

    async def _tool(
        self,
        setup: EpisodeSetup,
        workspace: Workspace,
        call_id: str,
        name: str,
        arguments: str,
        outcome: EpisodeOutcome,
        resume: ResumePoint | None = None,
    ) -> str:
        ep = setup.episode_id
        if resume is None or call_id not in resume.called:
            await self.rt.emit(ToolCalled(episode_id=ep, call_id=call_id, name=name, arguments=arguments))
        call = ToolCall(id=call_id, name=name, arguments=arguments)
        result = run_tool(call, workspace, dict(setup.baselines), multi=setup.multi)
        if result.written is not None:
            await self._record_file(ep, *result.written)
        content, ok = result.content, result.ok
        if result.job_tool:
            content, ok = await self._job_tool(setup, name, result.extra, outcome)
        elif result.submit:
            prior = resume.submits.get(call_id) if resume is not None else None
            content, ok = await self._submit(setup, workspace, outcome, prior)
        # The full text goes to the blob store when the event's copy is cut: a resumed episode needs all of it.
        blob = await self.blobs.aput(content.encode("utf-8")) if len(content) > _EVENT_CHARS else ""
        await self.rt.emit(
            ToolReturned(
                episode_id=ep,
                call_id=call_id,
                ok=ok,
                content=content[:_EVENT_CHARS],
                error="" if ok else content[:500],
                blob=blob,
            )
        )
        return content

    async def _submit(
        self, setup: EpisodeSetup, workspace: Workspace, outcome: EpisodeOutcome, prior: PendingSubmit | None = None
    ) -> tuple[str, bool]:
        """Count, validate and record one submission. ``prior``: this submission was already received before a
        crash (same attempt number; the recorded verdict, if any, stands)."""
        ep = setup.episode_id
        job = _job_or_none(setup.workspace / "job.toml")
        if setup.multi and prior is None:
            refused = self._refuse_submit(setup, outcome)
            if refused:
                return refused, False
        if prior is None:
            outcome.attempts += 1
            attempt = outcome.attempts
            outcome.parseable = outcome.parseable or job is not None
            await self.rt.emit(SubmissionReceived(episode_id=ep, attempt=attempt, parseable=job is not None))
        else:
            attempt = prior.attempt
        if prior is not None and prior.verdict is not None:
            v = prior.verdict
            report = ProbeReport(
                ok=isinstance(v, SubmissionValidated), checks=list(v.checks), seconds=v.probe_seconds, parseable=True
            )
            if isinstance(v, SubmissionValidated):
                if setup.multi:
                    return await self._submit_job(setup, outcome, attempt, v.job_blob)
                outcome.status, outcome.job, outcome.bundle = "validated", job, v.job_blob
                return f"Job validated on attempt {attempt} and queued for training.", True
            return self._rejected_text(setup, outcome, report, attempt), False
        report = await self.validator.validate(setup.workspace, setup.spec, attempt)
        if report.ok and job is not None:
            bundle = await self.blobs.aput(make_bundle(workspace.snapshot(), setup.spec_json))
            await self.rt.emit(
                SubmissionValidated(
                    episode_id=ep,
                    attempt=attempt,
                    checks=report.checks,
                    probe_seconds=report.seconds,
                    job_blob=bundle,
                    isolation=report.isolation,
                )
            )
            if setup.multi:
                return await self._submit_job(setup, outcome, attempt, bundle)
            outcome.status, outcome.job, outcome.bundle = "validated", job, bundle
            return f"Job validated on attempt {attempt} and queued for training.", True
        await self.rt.emit(
            SubmissionRejected(
                episode_id=ep,
                attempt=attempt,
                checks=report.checks,
                probe_seconds=report.seconds,
                isolation=report.isolation,
            )
        )
        return self._rejected_text(setup, outcome, report, attempt), False

    def _rejected_text(self, setup: EpisodeSetup, outcome: EpisodeOutcome, report: ProbeReport, attempt: int) -> str:
        if not setup.multi:
            if attempt >= setup.max_attempts:
                outcome.status = "rejected"
            return nudge(report, attempt, setup.max_attempts)
        rejected = self._episode(setup).rejected
        if rejected >= setup.max_attempts and not outcome.jobs:
            outcome.status = "rejected"
        return nudge(report, rejected, setup.max_attempts)

    # -- multi-job episodes ------------------------------------------------------------------------------------

    def _episode(self, setup: EpisodeSetup) -> EpisodeState:
        return self.rt.state(EpisodesProjection)[setup.episode_id]

    async def _set_limits(self, setup: EpisodeSetup) -> None:
        limits = setup.spec.episode
        assert limits is not None
        await self.rt.emit(
            EpisodeLimitsSet(
                episode_id=setup.episode_id,
                max_jobs=limits.max_jobs,
                job_budget_usd=limits.budget_usd,
                wall_s=float(limits.wall_s),
            )
        )

    def _job_time_budget(self, setup: EpisodeSetup) -> float:
        return float(setup.spec.bounds.time_budget_s)

    def _refuse_submit(self, setup: EpisodeSetup, outcome: EpisodeOutcome) -> str:
        """Why a multi-job episode's submission is refused before it is even probed ("" = go ahead)."""
        ep = self._episode(setup)
        if ep.final_job:
            return "error: the episode is finished"
        if ep.rejected >= setup.max_attempts:
            return f"error: {ep.rejected} submissions were rejected, the most this task allows; call finish"
        admission = admit_job(
            ep, now=self.rt.clock.now(), time_budget_s=self._job_time_budget(setup), usd_per_s=setup.job_usd_per_s
        )
        return "" if admission.ok else f"error: not submitted: {admission.reason}"

    async def _submit_job(
        self, setup: EpisodeSetup, outcome: EpisodeOutcome, attempt: int, bundle: str
    ) -> tuple[str, bool]:
        """A validated submission becomes the episode's next job, if its budget admits it (decided and recorded
        with no await in between: the check reads the projection, the emit applies before its first await)."""
        ep = self._episode(setup)
        done = next((j for j in ep.jobs.values() if j.attempt == attempt), None)
        if done is None:
            admission = admit_job(
                ep, now=self.rt.clock.now(), time_budget_s=self._job_time_budget(setup), usd_per_s=setup.job_usd_per_s
            )
            if not admission.ok:
                return f"Job validated on attempt {attempt} but not queued: {admission.reason}", False
            index = len(ep.jobs) + 1
            job_id = f"{setup.episode_id}-job-{index}"
            parent = outcome.jobs[-1] if outcome.jobs else ""
            await self.rt.emit(
                EpisodeJobSubmitted(
                    episode_id=setup.episode_id,
                    job_id=job_id,
                    index=index,
                    parent_job_id=parent,
                    bundle=bundle,
                    attempt=attempt,
                    reserve_usd=admission.reserve_usd,
                    reserve_s=admission.reserve_s,
                )
            )
        else:
            job_id = done.job_id
        if not self._episode(setup).jobs[job_id].queued:
            await self._queue(setup, job_id, bundle)
        if job_id not in outcome.jobs:
            outcome.jobs.append(job_id)
        left = setup.spec.episode.max_jobs - len(outcome.jobs) if setup.spec.episode else 0
        return (
            f"Job validated on attempt {attempt} and queued as job-{self._episode(setup).jobs[job_id].index} "
            f"({left} more job(s) allowed). It runs while "
            "you work: use job_status, wait_for_jobs and job_result, then finish(final_job_id).",
            True,
        )

    async def _queue(self, setup: EpisodeSetup, job_id: str, bundle: str) -> None:
        # The model from the bundle's own job.toml (the workspace may have moved on since it was submitted).
        text = bundle_files(await self.blobs.aget(bundle)).get("job.toml", b"").decode("utf-8", "replace")
        try:
            model = parse_job_config(text).prime_rl.model
        except JobConfigError:
            model = setup.spec.bounds.base_models[0]  # the probe validated it; this is only a safety net
        await self.rt.emit(
            JobQueued(
                job_id=job_id,
                episode_id=setup.episode_id,
                family=setup.spec.family,
                base_model=model,
                bundle=bundle,
                time_budget_s=self._job_time_budget(setup),
                estimate_s=self._estimate(setup.spec.family, model),
            )
        )

    def _estimate(self, family: str, model: str) -> float:
        """The longest-first order's estimate for a new job (0.0, unknown, in a runtime without the queue)."""
        queue = self.rt.states.get(QueueProjection.name)
        return 0.0 if queue is None else duration_estimate(queue, family, model)

    async def _job_tool(
        self, setup: EpisodeSetup, name: str, args: dict[str, Any], outcome: EpisodeOutcome
    ) -> tuple[str, bool]:
        ep = self._episode(setup)
        if name == "job_status":
            text = job_status_text(ep, args["job_id"])
        elif name == "job_result":
            text = job_result_text(ep, args["job_id"])
        elif name == "wait_for_jobs":
            found_jobs = [lookup(ep, j) for j in args.get("job_ids") or [agent_id(j) for j in ep.jobs.values()]]
            refused = next((f for f in found_jobs if isinstance(f, str)), None)
            if refused is not None:
                return refused, False
            ids = [j.job_id for j in found_jobs if not isinstance(j, str)]
            deadline = ep.started_ts + ep.wall_s - self.rt.clock.now()
            cap = max(0.0, min(float(args.get("timeout_s", setup.wait_cap_s)), setup.wait_cap_s, deadline))

            def done() -> bool:
                jobs = self._episode(setup).jobs
                return all(jobs[j].status in DONE for j in ids)

            with anyio.move_on_after(cap):
                await self.rt.wait_until(done)
            text = jobs_summary(self._episode(setup), [agent_id(self._episode(setup).jobs[j]) for j in ids])
        else:
            assert name == FINISH
            found = lookup(ep, args["final_job_id"])
            if isinstance(found, str):
                return found, False
            if not ep.final_job:
                await self.rt.emit(EpisodeFinalChosen(episode_id=setup.episode_id, job_id=found.job_id))
            outcome.status, outcome.final_job = "finished", found.job_id
            text = f"Episode finished; final job {agent_id(found)}."
        return text, not text.startswith("error:")

    async def _record_file(self, episode_id: str, path: str, data: bytes) -> None:
        blob = await self.blobs.aput(data)
        await self.rt.emit(WorkspaceFileWritten(episode_id=episode_id, path=path, blob=blob, size=len(data)))

    async def _finish(self, outcome: EpisodeOutcome, reason: str) -> EpisodeOutcome:
        await self.rt.emit(EpisodeFinished(episode_id=outcome.episode_id, status=outcome.status, reason=reason))
        log.info("episode.finished", episode_id=outcome.episode_id, status=outcome.status, attempts=outcome.attempts)
        return outcome
