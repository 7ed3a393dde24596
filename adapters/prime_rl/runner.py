"""The GPU inner trainer: ``PrimeRLRunner.run(job, progress) -> JobResult`` (the ``InnerTrainer`` port).

Phases, each in its own processes, with nothing of one phase left running when the next starts:

1. **config**: ``job.toml`` + ``task_spec.json`` -> ``rl.toml`` (:mod:`.config`); a refused job is a
   ``config_error`` before any process starts.
2. **install**: ``uv pip install --no-deps -e <env>`` into prime-rl's venv (``--no-deps`` so the env cannot
   replace prime-rl's pinned verifiers; later commands use ``uv run --no-sync`` so nothing prunes it).
3. **dry run**: ``rl @ rl.toml --dry-run`` validates everything and imports the env (seconds, no GPU):
   a ``config_error`` or ``env_crash`` here costs no GPU time.
4. **train**: ``rl @ rl.toml`` in its own process group, under the task's time budget (minus a reserve for
   scoring); ``metrics.jsonl`` and the orchestrator/trainer logs are followed for progress; at the
   deadline the whole group gets SIGTERM, then SIGKILL; a run whose every rollout errors for several
   steps is stopped as an ``env_crash``; failures are classified from exit code and logs (:mod:`.classify`).
5. **score** (only after every training process has exited): the hidden eval package is requested only
   now (``eval_source``; under the pod agent, :meth:`PrimeRLRunner.use_eval_source` makes it the agent's
   ``await_eval``: the controller sends the package it built under the engine's key), the base and the
   trained model are each served with vLLM and scored by the :class:`adapters.vllm.HiddenScorer` in
   separate processes where the agent's env is not importable.

Child processes get a filtered environment: no variable whose name looks like a secret reaches the
agent's env code (it runs inside the env servers of step 4). Every executable is a configurable command
so tests run the whole pipeline on CPU with stand-ins (``fixtures/prime_rl/standins/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import msgspec
import structlog

from adapters.sandbox import ChildFailure, copy_regular_files, processes_of
from adapters.vllm.types import EvalSampling, HiddenScorer, ScoringFailed, ServedModel, load_eval_package
from adapters.vllm.weights import final_broadcast, find_hf_snapshot, is_lora_dir, make_servable_dir
from families.spec import SpecError, TaskSpec, validate_spec
from handlers.episode.job_config import JobConfig, JobConfigError, load_job_config
from handlers.ports.inner_trainer import FailureReason, InnerTrainer, JobBundle, JobResult, Progress, ProgressCallback

from .classify import Failure, classify_dry_run, classify_run, is_oom, last_error_line, strip_ansi
from .config import ConfigRefused, GeneratedConfig, build_rl_config, env_module_name
from .procgroup import GroupProcess, run_to_end, tail_text
from .progress import LineFollower, TrainTracker

__all__ = ["EvalSource", "PrimeRLRunner", "RunnerSettings", "child_environment", "load_task_spec"]

log = structlog.get_logger(__name__)

# Fetches the family's hidden eval package (a project dir) for a job; called only once training has ended.
EvalSource = Callable[[JobBundle], Awaitable[Path]]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_PASS_PREFIXES = (
    "PATH",
    "HOME",
    "LANG",
    "LC_",
    "TZ",
    "TMPDIR",
    "CUDA",
    "NVIDIA",
    "NCCL",
    "HF_",
    "UV_",
    "PYTHON",
    "LD_LIBRARY_PATH",
    "TORCH",
    "TRITON",
    "VLLM",
    "OMP_",
    "CC",
    "CXX",
    "SSL_CERT",
)


class RunnerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How a pod runs jobs. Command templates may use ``{prime_rl_dir}`` and ``{env_dir}``."""

    work_root: str
    prime_rl_dir: str = "/opt/prime-rl"
    gpus: int = 2
    install_command: tuple[str, ...] = (
        "uv", "pip", "install", "--python", "{prime_rl_dir}/.venv/bin/python", "--no-deps", "-e", "{env_dir}",
    )  # fmt: skip
    rl_command: tuple[str, ...] = ("uv", "run", "--project", "{prime_rl_dir}", "--no-sync", "rl")
    inference_command: tuple[str, ...] = ("uv", "run", "--project", "{prime_rl_dir}", "--no-sync", "inference")
    inference_port: int = 8000  # the 1-GPU layout's separately started server (prime-rl's default client URL)
    env: dict[str, str] = {}  # extra environment for every child (HF_HOME, UV_CACHE_DIR, stand-in switches)
    install_timeout_s: float = 600.0
    dry_run_timeout_s: float = 300.0
    inference_health_timeout_s: float = 900.0
    kill_grace_s: float = 20.0
    poll_s: float = 2.0
    score_reserve_fraction: float = 0.4  # of the task's time budget, kept for the pre/post scoring
    score_pre: bool = True  # informational: the reward uses the frozen best_pre
    eval_max_tokens: int = 1024
    eval_limit: int | None = None  # score only the first N hidden tasks (benchmarks; None in production)
    abort_after_all_error_steps: int = 3
    hf_home: str | None = None
    log_tail_chars: int = 4000
    # The uid every training-phase process (install, dry run, inference server, rl: the agent's env code) runs
    # as; None: the agent's own (root on a pod). Scoring stays on this process's uid, and every process of
    # ``train_uid`` is killed before the hidden eval package is asked for, so none is left to read it (it is
    # 0700 to this process's uid anyway). The uid needs write access to prime-rl's venv for the install.
    train_uid: int | None = None


def child_environment(extra: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for child processes: an allow-list of the parent's, never a secret-looking name."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if k.startswith(_PASS_PREFIXES) and not _SECRET_NAME.search(k)}
    return env | dict(extra)


def _hand_over(work: Path, train_dir: Path, env_dir: Path, uid: int) -> Path:
    """The training uid's own: ``train_dir`` (with a copy of the env package and a HOME); ``work`` traversable.

    The env package is copied (regular files only: a symlink the agent planted would otherwise be copied, by
    root, as the file it points to), so the uid needs nothing of the bundle's directory (nor its parents).
    """
    copy = train_dir / "env" / env_dir.name
    copy_regular_files(env_dir, copy)
    (train_dir / "home").mkdir()
    work.chmod(0o755)
    for dirpath, dirnames, filenames in os.walk(train_dir):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)
    os.chown(train_dir, uid, uid)
    return copy


def _kill_uid(uid: int) -> int:
    """SIGKILL every process of ``uid`` until none is left; returns how many were found."""
    found: set[int] = set()
    for _ in range(50):
        pids = processes_of(uid)
        if not pids:
            break
        found.update(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return len(found)


def load_task_spec(path: Path) -> TaskSpec:
    """A bundle's ``task_spec.json`` (its file name is not the spec name, so ``load_spec`` does not apply)."""
    try:
        spec = msgspec.json.decode(path.read_bytes(), type=TaskSpec)
    except (OSError, msgspec.DecodeError) as exc:
        raise SpecError(f"{path}: {exc}") from None
    problems = validate_spec(spec)
    if problems:
        raise SpecError(f"{path}: " + "; ".join(problems))
    return spec


def _fill(template: Sequence[str], **values: str) -> list[str]:
    return [part.format(**values) for part in template]


class _Trained(msgspec.Struct, frozen=True, kw_only=True):
    """What the train phase leaves for the job result, whatever happens after it."""

    seconds: float = 0.0
    metrics: dict[str, float] = {}
    log_tail: str = ""


class _TrainOutcome(msgspec.Struct, kw_only=True):
    returncode: int
    timed_out: bool = False
    aborted: Failure | None = None
    seconds: float = 0.0
    stragglers: bool = False
    server_failure: Failure | None = None


class PrimeRLRunner:
    """The ``prime-rl`` implementation of :class:`handlers.ports.inner_trainer.InnerTrainer`."""

    name = "prime-rl"

    def __init__(self, settings: RunnerSettings, *, scorer: HiddenScorer, eval_source: EvalSource) -> None:
        self.settings = settings
        self.scorer = scorer
        self.eval_source = eval_source

    def use_eval_source(self, source: EvalSource) -> None:
        """Where the hidden eval package comes from (the pod agent binds its controller-fed source here)."""
        self.eval_source = source

    # -- the port ---------------------------------------------------------------------------------

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        started = time.monotonic()
        timings: dict[str, float] = {}
        work = Path(self.settings.work_root) / job.job_id
        if work.exists():
            shutil.rmtree(work)  # a retried job starts clean: prime-rl refuses a used run dir
        train_dir = work / "train"
        (train_dir / "logs").mkdir(parents=True)

        def failed(
            reason: FailureReason, detail: str, trained: _Trained | None = None, log_tail: str = ""
        ) -> JobResult:
            timings["total"] = round(time.monotonic() - started, 3)
            log.warning("prime_rl.job_failed", job_id=job.job_id, reason=reason, detail=detail)
            t = trained or _Trained(log_tail=log_tail)
            return JobResult(
                job_id=job.job_id,
                ok=False,
                failure=reason,
                detail=detail,
                timings=timings,
                train_seconds=t.seconds,
                metrics=t.metrics,
                log_tail=t.log_tail,
            )

        try:
            job_cfg, spec, gen = self._configure(job, train_dir)
        except (JobConfigError, ConfigRefused, SpecError, OSError) as exc:
            return failed("config_error", str(exc))
        env_dir = (job.path / job_cfg.env.path).resolve()
        if not env_dir.is_relative_to(job.path.resolve()):  # job.toml is agent-written: stay in the bundle
            return failed("config_error", f"job.toml: [env].path = {job_cfg.env.path!r}: outside the bundle")
        if not (env_dir / "pyproject.toml").is_file():
            return failed(
                "config_error", f"job.toml: [env].path = {job_cfg.env.path!r}: no pyproject.toml in the bundle there"
            )
        module = env_module_name(job_cfg.env.id)
        env = child_environment(self.settings.env)
        uid = self.settings.train_uid
        if uid is not None:
            try:
                env_dir = _hand_over(work, train_dir, env_dir, uid)
            except ChildFailure as exc:  # the env package is too large to copy
                return failed("config_error", f"job.toml: [env].path: {exc}")
            env["HOME"] = str(train_dir / "home")
        budget = float(spec.bounds.time_budget_s)
        train_budget = budget * (1.0 - self.settings.score_reserve_fraction)
        deadline = started + train_budget
        await progress(Progress(phase="train", total_steps=gen.max_steps, message="installing the env package"))

        # -- install --------------------------------------------------------------------------------
        fill = {"prime_rl_dir": self.settings.prime_rl_dir, "env_dir": str(env_dir)}
        inst = await run_to_end(
            _fill(self.settings.install_command, **fill),
            cwd=train_dir,
            env=env,
            log_path=train_dir / "logs" / "install.log",
            timeout_s=self.settings.install_timeout_s,
            user=uid,
        )
        timings["install"] = inst.seconds
        if inst.returncode != 0:
            out = strip_ansi(tail_text(inst.log_path, 4000))
            why = "timed out" if inst.timed_out else f"exit {inst.returncode}"
            last = (out.strip().splitlines() or [""])[-1]
            err = last_error_line(out) or last
            return failed("env_crash", f"installing the env package failed ({why}): {err}", log_tail=out)

        # -- dry run ----------------------------------------------------------------------------------
        rl = _fill(self.settings.rl_command, **fill)
        await progress(Progress(phase="train", total_steps=gen.max_steps, message="validating the config (dry run)"))
        dry = await run_to_end(
            [*rl, "@", "rl.toml", "--dry-run"],
            cwd=train_dir,
            env=env,
            log_path=train_dir / "logs" / "dry_run.log",
            timeout_s=self.settings.dry_run_timeout_s,
            user=uid,
        )
        timings["dry_run"] = dry.seconds
        run_dir = train_dir / gen.layout.run_dir
        if dry.returncode != 0 or dry.timed_out:
            out = tail_text(dry.log_path, 12000)
            f = classify_dry_run(out, env_module=module)
            return failed(f.reason, f.detail, log_tail=strip_ansi(out)[-self.settings.log_tail_chars :])
        if not (run_dir / "configs").is_dir():
            return failed("config_error", f"rl --dry-run exited 0 but wrote no {gen.layout.run_dir}/configs/")

        # -- train ------------------------------------------------------------------------------------
        tracker = TrainTracker(gen.max_steps)
        outcome = await self._train(gen, rl, train_dir, run_dir, env, deadline, tracker, progress)
        if uid is not None:  # whatever left the group and the marker: nothing of the training uid survives
            outcome.stragglers = bool(await asyncio.to_thread(_kill_uid, uid)) or outcome.stragglers
        timings["train"] = outcome.seconds
        metrics = tracker.summary()
        if outcome.stragglers:
            metrics["stragglers_killed"] = 1.0
        rl_tail = strip_ansi(tail_text(train_dir / "logs" / "rl.log", 20000))[-self.settings.log_tail_chars :]
        trained = _Trained(seconds=outcome.seconds, metrics=metrics, log_tail=rl_tail)
        failure = outcome.server_failure or outcome.aborted
        if failure is None and (outcome.returncode != 0 or outcome.timed_out):
            failure = self._classify(outcome, train_dir, run_dir, module, train_budget)
        if failure is not None:
            return failed(failure.reason, failure.detail, trained)
        weights = final_broadcast(run_dir, gen.max_steps)
        if weights is None:
            missing = f"{gen.layout.run_dir}/broadcasts/step_{gen.max_steps}/STABLE"
            return failed("trainer_crash", f"rl exited 0 but wrote no final weights ({missing})", trained)

        # -- score (every training process has exited) ---------------------------------------------
        return await self._score(job, gen, spec, weights, work, timings, trained, started, progress)

    # -- phases ---------------------------------------------------------------------------------------

    def _configure(self, job: JobBundle, train_dir: Path) -> tuple[JobConfig, TaskSpec, GeneratedConfig]:
        job_cfg = load_job_config(job.path / "job.toml")
        spec = load_task_spec(job.path / "task_spec.json")
        gen = build_rl_config(job_cfg, spec, gpus=self.settings.gpus, inference_port=self.settings.inference_port)
        (train_dir / "rl.toml").write_text(gen.rl_toml, encoding="utf-8")
        if gen.inference_toml is not None:
            (train_dir / "inference.toml").write_text(gen.inference_toml, encoding="utf-8")
        return job_cfg, spec, gen

    async def _start_colocated_inference(
        self, train_dir: Path, env: Mapping[str, str]
    ) -> tuple[GroupProcess, Failure | None]:
        """The 1-GPU layout: prime-rl's `inference` server on the shared GPU, healthy before `rl` starts."""
        s = self.settings
        cmd = _fill(s.inference_command, prime_rl_dir=s.prime_rl_dir, env_dir="")
        proc = await GroupProcess.start(
            [*cmd, "@", "inference.toml"],
            cwd=train_dir,
            env=env,
            log_path=train_dir / "logs" / "inference_server.log",
            user=s.train_uid,
        )
        deadline = time.monotonic() + s.inference_health_timeout_s
        async with httpx.AsyncClient(timeout=5.0) as client:
            while time.monotonic() < deadline:
                if await proc.wait(0) is not None:
                    text = tail_text(proc.log_path, 8000)
                    reason: FailureReason = "oom" if is_oom(text) else "trainer_crash"
                    err = last_error_line(text) or f"exit {proc.returncode}"
                    return proc, Failure(reason=reason, detail=f"inference_server.log: {err}")
                try:
                    if (await client.get(f"http://127.0.0.1:{s.inference_port}/health")).status_code == 200:
                        return proc, None
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(s.poll_s)
        return proc, Failure(reason="trainer_crash", detail="the inference server did not become healthy in time")

    async def _train(
        self,
        gen: GeneratedConfig,
        rl: list[str],
        train_dir: Path,
        run_dir: Path,
        env: Mapping[str, str],
        deadline: float,
        tracker: TrainTracker,
        progress: ProgressCallback,
    ) -> _TrainOutcome:
        s = self.settings
        started = time.monotonic()
        server: GroupProcess | None = None
        outcome = _TrainOutcome(returncode=0)
        try:
            if gen.inference is not None:
                server, outcome.server_failure = await self._start_colocated_inference(train_dir, env)
                if outcome.server_failure is not None:
                    outcome.returncode = -1
                    return outcome
            await progress(Progress(phase="train", total_steps=gen.max_steps, message="training started"))
            proc = await GroupProcess.start(
                [*rl, "@", "rl.toml"], cwd=train_dir, env=env, log_path=train_dir / "logs" / "rl.log", user=s.train_uid
            )
            followers = (
                (LineFollower(run_dir / "metrics.jsonl"), tracker.feed_metrics_line),
                (LineFollower(run_dir / "logs" / "latest" / "orchestrator.log"), tracker.feed_orchestrator_line),
                (LineFollower(run_dir / "logs" / "latest" / "trainer.log"), tracker.feed_trainer_line),
            )

            async def drain() -> None:
                for follower, feed in followers:
                    for line in follower.read_new():
                        feed(line)
                for p in tracker.pending_progress():
                    await progress(p)

            try:
                while True:
                    code = await proc.wait(s.poll_s)
                    await drain()
                    if code is not None:
                        outcome.returncode = code
                        break
                    if time.monotonic() >= deadline:
                        outcome.timed_out = True
                        outcome.returncode = await proc.stop(grace_s=s.kill_grace_s)
                        break
                    if s.abort_after_all_error_steps and tracker.all_errors_for(s.abort_after_all_error_steps):
                        outcome.aborted = Failure(
                            reason="env_crash",
                            detail=f"every rollout errored for {s.abort_after_all_error_steps} consecutive steps "
                            f"(train/agg/all/has_error/mean = 1); stopped the run",
                        )
                        outcome.returncode = await proc.stop(grace_s=s.kill_grace_s)
                        break
                outcome.stragglers = await proc.reap_stragglers(grace_s=s.kill_grace_s)
                await drain()
            finally:
                if proc.returncode is None:  # cancelled or crashed here: leave nothing running
                    await asyncio.shield(proc.stop(grace_s=s.kill_grace_s))
        finally:
            if server is not None:
                await asyncio.shield(server.stop(grace_s=s.kill_grace_s))
            outcome.seconds = round(time.monotonic() - started, 3)
        return outcome

    def _classify(self, outcome: _TrainOutcome, train_dir: Path, run_dir: Path, module: str, budget: float) -> Failure:
        latest = run_dir / "logs" / "latest"
        logs = {"rl": tail_text(train_dir / "logs" / "rl.log", 20000)}
        for name in ("trainer.log", "orchestrator.log", "inference.log"):
            logs[name] = tail_text(latest / name, 20000)
        if (train_dir / "logs" / "inference_server.log").exists():
            logs["inference_server.log"] = tail_text(train_dir / "logs" / "inference_server.log", 20000)
        env_logs = {
            f"envs/train/{p.name}": tail_text(p, 20000) for p in sorted((latest / "envs" / "train").glob("*.log"))
        }
        return classify_run(
            outcome.returncode,
            timed_out=outcome.timed_out,
            logs=logs,
            env_logs=env_logs,
            env_module=module,
            budget_s=budget,
        )

    async def _score(
        self,
        job: JobBundle,
        gen: GeneratedConfig,
        spec: TaskSpec,
        weights: Path,
        work: Path,
        timings: dict[str, float],
        trained_run: _Trained,
        started: float,
        progress: ProgressCallback,
    ) -> JobResult:
        s = self.settings
        score_dir = work / "score"
        metrics = dict(trained_run.metrics)
        sampling = EvalSampling(
            temperature=spec.eval.temperature,
            max_tokens=s.eval_max_tokens,
            max_turns=spec.eval.max_turns,
            limit=s.eval_limit,
        )

        def done(
            ok: bool,
            *,
            pre: float | None = None,
            post: float | None = None,
            detail: str = "",
            log_tail: str | None = None,
            sampling: str = "",
        ) -> JobResult:
            timings["total"] = round(time.monotonic() - started, 3)
            return JobResult(
                job_id=job.job_id,
                ok=ok,
                pre=pre,
                post=post,
                failure=None if ok else "scoring_error",
                detail=detail,
                train_seconds=trained_run.seconds,
                timings=timings,
                metrics=metrics,
                log_tail=trained_run.log_tail if log_tail is None else log_tail,
                sampling=sampling,
            )

        try:
            package = load_eval_package(await self.eval_source(job))
            if package.family != job.family:
                raise ScoringFailed(f"the eval package is for {package.family!r}, the job for {job.family!r}")
            pre = None
            if s.score_pre:
                await progress(Progress(phase="pre_score", message=f"scoring {gen.model} on the hidden eval"))
                pre = await self.scorer.score(ServedModel.base_model(gen.model), package, sampling, score_dir / "pre")
                timings["pre_score"] = pre.seconds
                metrics |= {"pre_n": float(pre.n), "pre_errored": float(pre.errored)}
                await progress(
                    Progress(phase="pre_score", reward=pre.score, message=f"pre {pre.score:.4f} (n={pre.n})")
                )
            if gen.lora_rank or is_lora_dir(weights):
                trained = ServedModel(name="trained", base=gen.model, lora_path=str(weights), lora_rank=gen.lora_rank)
            else:
                snapshot = find_hf_snapshot(gen.model, Path(s.hf_home) if s.hf_home else None)
                if snapshot is None:
                    raise ScoringFailed(
                        f"{gen.model}: base model files not in the Hugging Face cache; cannot serve the fine-tune"
                    )
                served = make_servable_dir(weights, snapshot, score_dir / "served_model")
                trained = ServedModel(name="trained", base=gen.model, weights_dir=str(served))
            await progress(Progress(phase="post_score", message="scoring the trained model on the hidden eval"))
            post = await self.scorer.score(trained, package, sampling, score_dir / "post")
            timings["post_score"] = post.seconds
            metrics |= {"post_n": float(post.n), "post_errored": float(post.errored)}
            await progress(
                Progress(phase="post_score", reward=post.score, message=f"post {post.score:.4f} (n={post.n})")
            )
        except ScoringFailed as exc:
            log.warning("prime_rl.scoring_failed", job_id=job.job_id, error=str(exc))
            return done(False, detail=str(exc), log_tail=exc.log_tail[-s.log_tail_chars :])
        except OSError as exc:
            return done(False, detail=f"scoring could not start: {exc}")
        return done(True, pre=pre.score if pre is not None else None, post=post.score, sampling=post.sampling)


if TYPE_CHECKING:  # a static check that the runner implements the port

    def _implements_the_port(runner: PrimeRLRunner) -> InnerTrainer:
        return runner
