"""The validation probe: the :class:`handlers.ports.validator.Validator` port, check by check.

Checks, in order (each a ``CheckResult`` whose detail tells the agent what to fix):

1. ``job_config``: job.toml parses; every ``[prime_rl]`` value known and inside the task's bounds;
   ``static_scan``: no import of project packages, no literal file access outside the env package;
2. ``env_import``: the env package imports with the real verifiers 0.4.0 and exports exactly one Taskset;
3. ``tasks``: enough tasks, a typed ``answer``, none equal to a hidden eval item (compared here);
4. ``tools``: the env's tools match the task's eval tool interface;
5. ``rubric``: the env's reward scores a correct answer clearly above a wrong one;
6. ``prime_rl_config``: the prime-rl config the job maps to is complete and consistent.

Checks 2-5 run agent code, only in the sandboxed child (one per submission: a confined fork of the zygote,
which imported verifiers once, or a cold sandbox that imports it itself); 1, 6 and every comparison with hidden
or reference data run here. At most ``max_concurrent`` submissions are in their sandbox at once; the others
wait before any of their timeouts start.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
import weakref
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import structlog

from adapters.sandbox import ChildFailure, IsolationPlan, Mode, detect_isolation, require_confinement
from events import NOT_RUN, CheckResult
from families.spec import TaskSpec
from handlers.episode.job_config import JobConfig, JobConfigError, check_bounds, load_job_config
from handlers.episode.setup import MIN_TASKS
from handlers.ports.validator import ProbeReport

from ._limits import ProbeLimits
from ._prime_map import config_problems, prime_rl_config
from ._rubric import judge_rubric, rubric_cases
from ._sandbox import Sandbox
from ._static import scan_env
from ._tasks import hidden_index, hidden_shingles, judge_tasks
from ._tools import compare_tools
from ._warm import WarmSandbox, ZygoteUnavailable, zygote_for

__all__ = ["CHECK_NAMES", "VERIFIERS_VERSION", "ProbeValidator", "describe_isolation"]

log = structlog.get_logger(__name__)

VERIFIERS_VERSION = "0.4.0"
CHECK_NAMES = ("job_config", "static_scan", "env_import", "tasks", "tools", "rubric", "prime_rl_config")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


def _redact(text: str) -> str:
    """Defence in depth: no value of a secret-looking engine variable ever reaches a check's detail."""
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, f"<{name} redacted>")
    return text


_PATHS = {
    "warm": "warm path (a fork of the probe's zygote, which imported verifiers once: new mount+pid+net+ipc+uts "
    "namespaces, its own tmpfs home, /tmp and /proc, only its workspace copy)",
    "cold": "cold path (a bubblewrap sandbox and interpreter of its own)",
}
ProbePath = Literal["warm", "cold"]


def describe_isolation(
    plan: IsolationPlan, uid: int | None, limits: ProbeLimits, nproc: int, uid_note: str = "", path: str = ""
) -> str:
    base = {
        "bwrap": "bwrap(net+pid+ipc+uts+mount namespaces; fs: read-only system/python/venv, read-only "
        "workspace copy, tmpfs home and /tmp; project, runs and keys not mounted)",
        "unshare": "unshare(net+pid+ipc+uts namespaces; NO filesystem confinement)",
        "none": "rlimits only (no namespaces; NO network or filesystem confinement)",
    }[plan.mode]
    parts = [base, f"uid {uid}" if uid is not None else "same uid as the engine"]
    if uid_note:
        parts[-1] += f" ({uid_note})"
    parts += [f"rlimits({limits.summary(nproc)})", "scrubbed env", f"wall timeouts (total {limits.wall_s:g} s)"]
    if path:
        kind, _, why = path.partition(":")
        parts.append(_PATHS[kind] + (f" [warm unavailable: {why.strip()}]" if why else ""))
    text = " + ".join(parts)
    if plan.note:
        text += f" [weaker because: {plan.note}]"
    if not plan.confined:
        text += " [UNSAFE: run without a sandbox by explicit opt-in]"
    return text


def _check(name: str, ok: bool, detail: str, seconds: float = 0.0) -> CheckResult:
    return CheckResult(name=name, ok=ok, detail=_redact(detail)[:4000], seconds=round(seconds, 3))


class ProbeValidator:
    """Validates a workspace in a sandboxed child; see the module docstring for the checks."""

    def __init__(
        self,
        *,
        limits: ProbeLimits | None = None,
        isolation: Mode | Literal["auto"] = "auto",
        python: Path | None = None,
        min_tasks: int = MIN_TASKS,
        max_tasks: int = 20_000,
        rubric_tasks: int = 6,
        preimport: bool = True,
        unsafe_no_sandbox: bool = False,
        path: ProbePath = "warm",
        max_concurrent: int | None = None,
        enforce_rubric: bool = True,
    ) -> None:
        self.limits = limits or ProbeLimits()
        self.isolation = isolation
        self.python = python
        self.min_tasks = min_tasks
        self.max_tasks = max_tasks
        self.rubric_tasks = rubric_tasks
        # False: verifiers is imported by the env itself, inside the env_import stage (its timeout must then
        # cover that import); tests of import-time attacks use it to skip the 5-9 s pre-import.
        self.preimport = preimport
        # Without bubblewrap the probe refuses (``WeakIsolation``) unless the user opted in to weaker isolation.
        self.unsafe_no_sandbox = unsafe_no_sandbox
        # "warm": fork a confined child of this process's zygote (verifiers imported once), falling back to a
        # cold sandbox where the zygote cannot be set up (the report's isolation line names the path that ran).
        self.path = path
        # Probes running at once; the rest wait before their timeouts start, so a burst of submissions cannot
        # push a probe past its start-up timeout.
        self.max_concurrent = max_concurrent or max(2, os.cpu_count() or 2)
        # False (the CPU replica's ``[episode] rubric_check = "report"``): the rubric check still runs and says
        # what it found, but a rubric that cannot tell right from wrong does not fail the submission, so a
        # reward-everything or reward-wrong env is a valid choice whose cost shows in the hidden eval instead.
        self.enforce_rubric = enforce_rubric
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.max_concurrent)
        return gate

    async def validate(self, workspace: Path, spec: TaskSpec, attempt: int) -> ProbeReport:
        started = time.monotonic()
        checks: list[CheckResult] = []
        t = time.monotonic()
        job, job_check = self._job_check(workspace, spec)
        checks.append(job_check)
        env_path = job.env.path if job is not None else "env"
        path_problem = _env_path_problem(workspace, env_path)
        t = time.monotonic()
        if path_problem and job is None:
            # The env path is a guess (the default) when job.toml does not parse: no second mistake to report.
            checks.append(_check("static_scan", False, NOT_RUN + "job.toml must parse first"))
        elif path_problem:
            checks.append(_check("static_scan", False, path_problem))
        else:
            findings, scanned = scan_env(workspace, env_path)
            checks.append(
                _check(
                    "static_scan",
                    not findings,
                    "; ".join(findings[:10]) + (f" (+{len(findings) - 10} more)" if len(findings) > 10 else "")
                    if findings
                    else f"{scanned} Python files scanned: no project imports, no file access outside the package",
                    time.monotonic() - t,
                )
            )
        isolation = ""
        if job is None or path_problem:
            why = "job.toml must parse first" if job is None else "[env].path must name a directory in the workspace"
            checks += [_check(n, False, NOT_RUN + why) for n in CHECK_NAMES[2:]]
        else:
            plan = detect_isolation(self.isolation)
            require_confinement(plan, unsafe=self.unsafe_no_sandbox, who="the validation probe")
            async with self._gate():
                isolation, sandbox_checks = await self._sandboxed(workspace, spec, job, plan)
            checks += sandbox_checks
        seconds = time.monotonic() - started
        ok = all(c.ok for c in checks)
        log.info(
            "probe.validated",
            attempt=attempt,
            ok=ok,
            seconds=round(seconds, 2),
            failed=[c.name for c in checks if not c.ok],
        )
        return ProbeReport(
            ok=ok, checks=checks, seconds=round(seconds, 3), parseable=job is not None, isolation=isolation
        )

    def _job_check(self, workspace: Path, spec: TaskSpec) -> tuple[JobConfig | None, CheckResult]:
        t = time.monotonic()
        try:
            job = load_job_config(workspace / "job.toml")
        except FileNotFoundError:
            return None, _check("job_config", False, "job.toml is missing from the workspace root")
        except (JobConfigError, OSError, UnicodeDecodeError) as exc:
            return None, _check("job_config", False, str(exc).replace(str(workspace) + "/", ""))
        errs = check_bounds(job.prime_rl, spec.bounds)
        detail = "; ".join(errs) if errs else f"[prime_rl] within the bounds of {spec.name}; env {job.env.id!r}"
        return job, _check("job_config", not errs, detail, time.monotonic() - t)

    async def _sandboxed(
        self, workspace: Path, spec: TaskSpec, job: JobConfig, plan: IsolationPlan
    ) -> tuple[str, list[CheckResult]]:
        lim = self.limits
        deadline = time.monotonic() + lim.wall_s
        checks: list[CheckResult] = []
        results: dict[str, Any] = {}

        def left(stage_s: float) -> float:
            return max(0.1, min(stage_s, deadline - time.monotonic()))

        boxes: list[Sandbox] = []
        isolation = describe_isolation(plan, None, lim, lim.nproc)
        try:
            t = time.monotonic()
            box, path, ready = await self._start(workspace, plan, boxes)
            isolation = describe_isolation(plan, box.uid, lim, box.nproc, box.uid_note, path)
            try:
                hidden_index(spec.family)  # built while a cold child imports verifiers
                hidden_shingles(spec.family)
                ready = ready or await box.wait_ready()
                if not ready.get("ok"):
                    raise ChildFailure(str(ready.get("error")))
                if ready.get("verifiers") != VERIFIERS_VERSION:
                    raise ChildFailure(f"verifiers {ready.get('verifiers')} in the sandbox, {VERIFIERS_VERSION} needed")
                startup = time.monotonic() - t
                checks.append(await self._import(box, job, left(lim.import_s), startup, results))
                if results.get("import"):
                    checks.append(await self._tasks(box, job, spec, left(lim.load_s), results))
                    checks.append(await self._tools_check(box, spec, left(lim.tools_s), results))
                    checks.append(await self._rubric(box, spec, left(lim.rubric_s), results))
                else:
                    checks += [
                        _check(n, False, NOT_RUN + "the env package must import first") for n in CHECK_NAMES[3:6]
                    ]
            finally:
                await box.close()
        except ChildFailure as exc:
            tail = boxes[-1].stderr_tail(600) if boxes else ""
            log.info("probe.child_failed", reason=str(exc), stderr=_redact(tail[-500:]))
            done = {c.name for c in checks}
            stage = next((n for n in CHECK_NAMES[2:6] if n not in done), None)
            if stage is not None:
                # The stage the failure is charged to failed: its detail must not read as a check that never ran.
                why = str(exc)
                why = (
                    f"the sandbox ended before this stage: {why.removeprefix(NOT_RUN)}"
                    if why.startswith(NOT_RUN)
                    else why
                )
                detail = why + (f"; stderr: {tail}" if tail else "")
                checks.append(_check(stage, False, detail))
            checks += [
                _check(n, False, f"{NOT_RUN}the {stage} stage failed")
                for n in CHECK_NAMES[2:6]
                if n not in done and n != stage
            ]
        checks = _ordered(checks)
        checks.append(self._config_check(job, results))
        return isolation, checks

    async def _start(
        self, workspace: Path, plan: IsolationPlan, boxes: list[Sandbox]
    ) -> tuple[Sandbox, str, dict[str, Any] | None]:
        """A started child, warm where the zygote works, else cold; the path it took; the warm child's ready."""
        python = self.python or Path(sys.executable)
        why = ""
        if self.path == "warm":
            try:
                zygote = zygote_for(plan, python)
                await zygote.ensure(self.limits.startup_s)
                warm = WarmSandbox(workspace, plan, self.limits, python, zygote)
                boxes.append(warm)
                try:
                    await warm.start()
                    ready = await warm.wait_ready()
                except BaseException:
                    await warm.close()
                    raise
                if ready.get("ok") or "warm sandbox setup failed" not in str(ready.get("error")):
                    return warm, "warm", ready
                await warm.close()
                why = str(ready.get("error"))
            except ZygoteUnavailable as exc:
                why = str(exc)
            log.warning("probe.warm_unavailable", reason=why)
        cold = Sandbox(workspace, plan, self.limits, self.python, preimport=self.preimport)
        boxes.append(cold)
        try:
            await cold.start()
        except BaseException:
            await cold.close()
            raise
        return cold, "cold" + (f": {why}" if why else ""), None

    async def _import(
        self, box: Sandbox, job: JobConfig, limit_s: float, startup: float, results: dict[str, Any]
    ) -> CheckResult:
        req = {"op": "import", "env_id": job.env.id, "env_path": job.env.path}
        reply = await box.request(req, limit_s, "importing the env package")
        if not reply.get("ok"):
            err = str(reply.get("error"))
            return _check("env_import", False, f"importing env {job.env.id!r} failed: {err}", reply.get("seconds", 0))
        results["import"] = reply
        detail = (
            f"module {reply['module']} ({reply['file']}) imports with verifiers {VERIFIERS_VERSION} "
            f"and exports one Taskset, {reply['taskset']} (sandbox start-up {startup:.1f} s)"
        )
        return _check("env_import", True, detail, reply.get("seconds", 0))

    async def _tasks(
        self, box: Sandbox, job: JobConfig, spec: TaskSpec, limit_s: float, results: dict[str, Any]
    ) -> CheckResult:
        req = {"op": "load", "env_id": job.env.id, "num_tasks": job.env.num_tasks, "max_tasks": self.max_tasks}
        t = time.monotonic()
        reply = await box.request(req, limit_s, "loading the tasks")
        if not reply.get("ok"):
            return _check("tasks", False, f"loading the tasks failed: {reply.get('error')}", time.monotonic() - t)
        ok, detail = judge_tasks(reply, spec.family, self.min_tasks)
        results["load"] = reply
        return _check("tasks", ok, detail, time.monotonic() - t)

    async def _tools_check(self, box: Sandbox, spec: TaskSpec, limit_s: float, results: dict[str, Any]) -> CheckResult:
        t = time.monotonic()
        reply = await box.request({"op": "tools"}, limit_s, "listing the tools")
        if not reply.get("ok"):
            return _check("tools", False, f"listing the env's tools failed: {reply.get('error')}", time.monotonic() - t)
        ok, detail = compare_tools(spec.tools, reply.get("tools", []))
        results["tools"] = reply.get("tools", []) if ok else []
        return _check("tools", ok, detail, time.monotonic() - t)

    async def _rubric(self, box: Sandbox, spec: TaskSpec, limit_s: float, results: dict[str, Any]) -> CheckResult:
        load = results.get("load")
        if not load or not load.get("items"):
            return _check("rubric", False, NOT_RUN + "no task loaded (see the tasks check)")
        names = {str(t["name"]) for t in results.get("tools", [])}
        cases = rubric_cases(load, spec.family, names, self.rubric_tasks)
        t = time.monotonic()
        reply = await box.request({"op": "rubric", "cases": cases}, limit_s, "scoring rollouts with the env's reward")
        if not reply.get("ok"):
            return _check("rubric", False, f"scoring failed: {reply.get('error')}", time.monotonic() - t)
        ok, detail = judge_rubric(cases, reply.get("results", []))
        if not ok and not self.enforce_rubric and detail.startswith("the reward "):  # scored, just not discerning
            ok, detail = True, f"not enforced (reported only): {detail}"
        return _check("rubric", ok, detail, time.monotonic() - t)

    def _config_check(self, job: JobConfig, results: dict[str, Any]) -> CheckResult:
        t = time.monotonic()
        cfg = prime_rl_config(job)
        imported = results.get("import")
        load = results.get("load")
        problems = config_problems(
            cfg,
            module=imported.get("module") if imported else None,
            tasks_loaded=len(load["items"]) if load else None,
        )
        p = job.prime_rl
        detail = "; ".join(problems) or (
            f"model {p.model}, env {job.env.id}, 1 train source, {p.max_steps} steps x batch {p.batch_size} "
            f"({p.batch_size // p.group_size} prompts x group {p.group_size}), {p.optimizer} lr {p.learning_rate:g}, "
            f"{p.algorithm}/{p.loss}, max_tokens {p.max_tokens} of seq_len {p.seq_len}"
        )
        return _check("prime_rl_config", not problems, detail, time.monotonic() - t)


def _ordered(checks: list[CheckResult]) -> list[CheckResult]:
    rank = {n: i for i, n in enumerate(CHECK_NAMES)}
    return sorted(checks, key=lambda c: rank.get(c.name, len(rank)))


def _env_path_problem(workspace: Path, env_path: str) -> str:
    p = PurePosixPath(env_path)
    if p.is_absolute() or ".." in p.parts or not env_path.strip():
        return f"[env].path {env_path!r} must be a relative directory inside the workspace, e.g. 'env'"
    full = workspace / env_path
    if full.is_symlink() or not full.is_dir():
        return f"[env].path {env_path!r}: no such directory in the workspace"
    return ""
