"""The embedded CPU implementation of the inner-trainer port: pre-score, GRPO on the agent's env, post-score.

``await CpuTrainer().run(JobBundle(job_id, family, root), progress)`` reads ``root/job.toml`` (and
``root/task_spec.json`` when present: its time budget and eval sampling), loads the tiny checkpoint the
job's ``model`` stands for, scores it on the family's hidden eval (``pre``), loads the agent's env package
from ``root/<[env].path>`` with real verifiers, trains with :func:`._loop.train`, and scores again
(``post``). Scores come from the tiny helper's in-process scorer (200 hidden tasks, sampled at the
eval temperature, seeded), never from the agent's rubric: the hidden eval is the judge.

Failures are classified as the port says: a job.toml or model that cannot be used is ``config_error``; an
env that does not load, or whose rollouts mostly fail, is ``env_crash``; a bug here is ``trainer_crash``;
a broken scorer is ``scoring_error``. Agent code runs in this process: only a pod agent (a sandboxed
process) may call this, never the engine.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import structlog
import torch

from adapters.inproc import EnvLoadError, load_env
from families.spec import TaskSpec, validate_spec
from handlers.inner_port import FailureReason, JobBundle, JobResult, Progress, ProgressCallback
from handlers.job_config import JobConfigError, load_job_config

from ._loop import EnvFailure, StepRecord, TrainReport, train
from ._settings import DEFAULT_LR_SCALE, CpuTrainSettings, settings_from_job

__all__ = ["CpuTrainer", "make_trainer"]

log = structlog.get_logger(__name__)


class _Failed(Exception):
    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class CpuTrainer:
    """GRPO with a tiny Qwen3-architecture model on the CPU (the default when no GPU provider is configured)."""

    name = "cpu-tiny"

    def __init__(
        self,
        *,
        lr_scale: float = DEFAULT_LR_SCALE,
        seed: int = 0,
        threads: int = 1,
        kl_coef: float = 0.0,
        epochs: int = 2,
        eval_limit: int | None = None,
        eval_seed: int = 0,
        eval_temperature: float | None = None,
    ) -> None:
        self.lr_scale = lr_scale
        self.seed = seed
        self.threads = threads
        self.kl_coef = kl_coef
        self.epochs = epochs
        self.eval_limit = eval_limit  # None: the whole hidden set
        self.eval_seed = eval_seed
        self.eval_temperature = eval_temperature  # None: the task spec's (else the scorer's default)

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        started = time.monotonic()
        timings: dict[str, float] = {}
        try:
            return await self._run(job, progress, timings, started)
        except _Failed as failed:
            log.warning("cpu_trainer.job_failed", job=job.job_id, reason=failed.reason, detail=failed.detail)
            timings["total"] = time.monotonic() - started
            return JobResult(
                job_id=job.job_id, ok=False, failure=failed.reason, detail=failed.detail, timings=_rounded(timings)
            )

    async def _run(
        self, job: JobBundle, progress: ProgressCallback, timings: dict[str, float], started: float
    ) -> JobResult:
        from adapters.tiny.model import load_checkpoint
        from adapters.tiny.scorer import EVAL_TEMPERATURE

        root = job.path
        try:
            config = load_job_config(root / "job.toml")
        except (JobConfigError, OSError) as exc:
            raise _Failed("config_error", str(exc)) from exc
        budget, spec_temperature = _spec_limits(root)
        temperature = self.eval_temperature or spec_temperature or EVAL_TEMPERATURE
        try:
            settings = settings_from_job(
                config.prime_rl,
                lr_scale=self.lr_scale,
                seed=self.seed,
                threads=self.threads,
                kl_coef=self.kl_coef,
                epochs=self.epochs,
            )
        except ValueError as exc:
            raise _Failed("config_error", f"job.toml: {exc}") from exc
        torch.set_num_threads(settings.threads)

        phase = time.monotonic()
        try:
            ckpt = load_checkpoint(settings.model)
        except (FileNotFoundError, KeyError) as exc:
            raise _Failed("config_error", f"job.toml: [prime_rl].model = {settings.model!r}: {exc}") from exc
        env_config: dict[str, Any] = {"num_tasks": config.env.num_tasks} if config.env.num_tasks else {}
        try:
            env = load_env(
                config.env.id, path=root / config.env.path, config=env_config, defaults={"family": job.family}
            )
        except EnvLoadError as exc:
            raise _Failed("env_crash", str(exc)) from exc
        timings["setup"] = time.monotonic() - phase

        await progress(Progress(phase="pre_score", message=f"scoring {ckpt.name} on the {job.family} hidden eval"))
        phase = time.monotonic()
        pre = await self._score(ckpt, job.family, temperature)
        timings["pre_score"] = time.monotonic() - phase
        await progress(Progress(phase="pre_score", reward=pre.score, message=f"pre {pre.score:.3f}"))

        # Leave room for the post-score (about as long as the pre-score) inside the job's time budget.
        deadline = None if budget is None else started + budget - 1.5 * timings["pre_score"] - 5.0

        async def on_step(record: StepRecord) -> None:
            loss = record.update.loss if record.update is not None else None
            await progress(
                Progress(
                    phase="train",
                    step=record.step,
                    total_steps=settings.max_steps,
                    reward=record.batch.reward_mean,
                    loss=loss,
                    message=record.action,
                )
            )

        try:
            report = await train(ckpt, env, settings, on_step=on_step, deadline=deadline)
        except EnvFailure as exc:
            raise _Failed("env_crash", str(exc)) from exc
        except EnvLoadError as exc:
            raise _Failed("env_crash", str(exc)) from exc
        except Exception as exc:
            raise _Failed("trainer_crash", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}") from exc
        timings["rollouts"] = report.rollout_seconds
        timings["learning"] = report.learn_seconds

        await progress(Progress(phase="post_score", message=f"scoring the trained model ({report.stop_reason})"))
        phase = time.monotonic()
        post = await self._score(ckpt, job.family, temperature)
        timings["post_score"] = time.monotonic() - phase
        timings["total"] = time.monotonic() - started
        await progress(Progress(phase="post_score", reward=post.score, message=f"post {post.score:.3f}"))
        return JobResult(
            job_id=job.job_id,
            ok=True,
            pre=pre.score,
            post=post.score,
            detail=_detail(settings, report),
            train_seconds=report.rollout_seconds + report.learn_seconds,
            timings=_rounded(timings),
            metrics=_metrics(settings, report),
            log_tail="\n".join(_step_line(s) for s in report.steps[-20:]),
            sampling=f"T={post.temperature:g}, top_p={post.top_p:g}, n={post.n}, seed={post.seed}, "
            f"max_turns={post.max_turns}, max_tokens={post.max_tokens}",
        )

    async def _score(self, ckpt: Any, family: str, temperature: float) -> Any:
        from adapters.tiny.scorer import score_hidden

        try:
            return await asyncio.to_thread(
                score_hidden, ckpt, family, temperature=temperature, seed=self.eval_seed, limit=self.eval_limit
            )
        except Exception as exc:
            raise _Failed("scoring_error", f"hidden eval of {family}: {type(exc).__name__}: {exc}") from exc


def _spec_limits(root: Path) -> tuple[float | None, float | None]:
    """(time budget in seconds, eval temperature) from ``task_spec.json``, when the bundle has one."""
    path = root / "task_spec.json"
    if not path.exists():
        return None, None
    try:
        # The bundle's copy is named task_spec.json, not <name>.json, so load_spec's file-name check does not apply.
        spec = msgspec.json.decode(path.read_bytes(), type=TaskSpec)
    except (msgspec.DecodeError, OSError) as exc:
        raise _Failed("config_error", f"{path}: {exc}") from exc
    errors = validate_spec(spec)
    if errors:
        raise _Failed("config_error", f"{path}: " + "; ".join(errors))
    return float(spec.bounds.time_budget_s), float(spec.eval.temperature)


def _rounded(timings: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in timings.items()}


def _metrics(settings: CpuTrainSettings, report: TrainReport) -> dict[str, float]:
    rewards = [s.batch.reward_mean for s in report.steps]
    updates = [s.update for s in report.steps if s.update is not None]
    return {
        "steps": float(len(report.steps)),
        "updates": float(report.updates),
        "rollbacks": float(report.rollbacks),
        "train_reward_first": rewards[0] if rewards else 0.0,
        "train_reward_last": rewards[-1] if rewards else 0.0,
        "train_reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
        "tokens_trained": float(sum(u.tokens for u in updates) * settings.epochs),
        "learning_rate": settings.learning_rate,
        "rollouts": float(sum(s.batch.rollouts for s in report.steps)),
    }


def _detail(settings: CpuTrainSettings, report: TrainReport) -> str:
    lines = [f"stopped: {report.stop_reason} after {len(report.steps)} of {settings.max_steps} steps"]
    lines += settings.notes
    return "; ".join(lines)


def _step_line(s: StepRecord) -> str:
    loss = f"{s.update.loss:.5f}" if s.update is not None else "-"
    return (
        f"step {s.step} {s.action}: reward {s.batch.reward_mean:.3f} malformed {s.batch.malformed:.2f} "
        f"loss {loss} lr {s.learning_rate:.2e} rollouts {s.rollout_seconds:.1f}s learn {s.learn_seconds:.1f}s"
    )


_OPTIONS: dict[str, type] = {
    "lr_scale": float,
    "seed": int,
    "threads": int,
    "kl_coef": float,
    "epochs": int,
    "eval_limit": int,
    "eval_seed": int,
    "eval_temperature": float,
}


def make_trainer(options: Mapping[str, str]) -> CpuTrainer:
    """The pod agent's registry factory: ``--trainer cpu --trainer-opt seed=1 --trainer-opt threads=2``."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"cpu trainer: unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        try:
            kwargs[key] = _OPTIONS[key](value)
        except ValueError:
            raise ValueError(f"cpu trainer: option {key}={value!r} is not a {_OPTIONS[key].__name__}") from None
    return CpuTrainer(**kwargs)
