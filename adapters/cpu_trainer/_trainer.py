"""The embedded CPU implementation of the inner-trainer port: pre-score, GRPO on the agent's env, post-score.

``await CpuTrainer().run(JobBundle(job_id, family, root), progress)`` reads ``root/job.toml`` (and
``root/task_spec.json`` when present: its time budget and eval sampling), loads the tiny checkpoint the
job's ``model`` stands for and scores it on the family's hidden eval (``pre``). Training runs in a
**separate child process** (:mod:`._supervise`, :mod:`._child`): confined like the validation probe
(bubblewrap where available, :mod:`._confine`), sealed from the installation key, it loads the agent's env
package (a copy of ``root/<[env].path>``, which must lie inside the bundle) with real verifiers, trains
with :func:`._loop.train` and writes the trained weights (safetensors) and its step records. When it ends
or its deadline passes, all of it is killed; only then does this process load the base checkpoint plus
those weights and score again (``post``). This process never imports the agent's env, so nothing the env
does can touch the scorer. Scores come from the tiny helper's in-process scorer (the hidden tasks, as many as
the task spec's ``eval.size`` (200) or the ``eval_limit`` option says, sampled at the eval temperature, seeded),
never from the agent's rubric: the hidden eval is the judge. The base model's ``pre`` score is computed once per
machine for the same checkpoint bytes, family, hidden set, settings and code (:mod:`adapters.tiny.score_memo`,
which ``ait baselines --inner cpu`` fills too), and reused by every later job of every pod.

Failures are classified as the port says: a job.toml or model that cannot be used is ``config_error``; an
env that does not load, or whose rollouts mostly fail, or that kills its process, is ``env_crash``; a bug
here is ``trainer_crash``; training past its deadline is ``timeout``; a broken scorer is
``scoring_error``. Every result states the isolation the training ran under (``JobResult.isolation``).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import msgspec
import structlog
import torch

from adapters.sandbox import IsolationPlan, Mode, WeakIsolation, detect_isolation, require_confinement
from adapters.tiny.score_memo import ScoreMemo, memo_key
from families.spec import TaskSpec, validate_spec
from handlers.episode.job_config import JobConfigError, load_job_config
from handlers.ports.inner_trainer import FailureReason, JobBundle, JobResult, Progress, ProgressCallback

from ._confine import ChildLimits, make_root
from ._loop import StepRecord, TrainReport
from ._settings import DEFAULT_LR_SCALE, CpuTrainSettings, settings_from_job
from ._supervise import ChildOutcome, TrainingFailed, train_in_child
from ._warm import TrainZygote, ZygoteUnavailable, zygote_for

__all__ = ["CpuTrainer", "make_trainer"]

log = structlog.get_logger(__name__)


class _Failed(Exception):
    def __init__(self, reason: FailureReason, detail: str, *, isolation: str = "", log_tail: str = "") -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.isolation = isolation
        self.log_tail = log_tail


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
        isolation: Mode | Literal["auto"] = "auto",
        work_root: Path | None = None,
        kill_grace_s: float = 120.0,
        limits: ChildLimits | None = None,
        max_steps: int | None = None,
        batch_size: int | None = None,
        unsafe_no_sandbox: bool = False,
        child_path: Literal["warm", "cold"] = "warm",
        score_memo: ScoreMemo | None = None,
    ) -> None:
        self.lr_scale = lr_scale
        self.seed = seed
        self.threads = threads
        self.kl_coef = kl_coef
        self.epochs = epochs
        self.eval_limit = eval_limit  # None: the whole hidden set
        self.eval_seed = eval_seed
        self.eval_temperature = eval_temperature  # None: the task spec's (else the scorer's default)
        self.isolation = isolation  # the strongest to try for the training child ("auto": the strongest there is)
        self.work_root = work_root  # None: a temporary directory per job, removed after it; else kept there
        self.kill_grace_s = kill_grace_s  # past the training deadline: the step in flight, saving the weights
        self.limits = limits
        # Caps on the job's own values, for smoke runs (tests, a first try on a slow laptop); None: the job's.
        self.max_steps = max_steps
        self.batch_size = batch_size
        # Without bubblewrap every job fails with config_error (one line naming what is missing) unless opted in.
        self.unsafe_no_sandbox = unsafe_no_sandbox
        # "warm": the training child is a confined fork of this process's training zygote (torch, transformers
        # and verifiers imported once; :mod:`._warm`), falling back to "cold" (a bubblewrap sandbox and
        # interpreter per job) where the zygote cannot be set up; "cold" forces the latter.
        if child_path not in _CHILD_PATHS:
            raise ValueError(f"cpu trainer: child_path={child_path!r}; expected one of {_CHILD_PATHS}")
        self.child_path = child_path
        # Scores by adapters.tiny.score_memo's key (the weights' bytes, the checkpoint's files, family, eval
        # settings, eval key, code): the same weights get the same score (same tasks, same seed), so each is taken
        # once per pod (this dict, also with the memo off) and once per machine (the memo on disk, which
        # `ait baselines --inner cpu` fills too). Every job from the same base skips the base's eval, and a job
        # that trained to weights scored before skips its post-score's.
        self.score_memo = ScoreMemo.from_env() if score_memo is None else score_memo
        self._scores: dict[str, Any] = {}

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        started = time.monotonic()
        timings: dict[str, float] = {}
        try:
            return await self._run(job, progress, timings, started)
        except _Failed as failed:
            log.warning("cpu_trainer.job_failed", job=job.job_id, reason=failed.reason, detail=failed.detail)
            timings["total"] = time.monotonic() - started
            return JobResult(
                job_id=job.job_id,
                ok=False,
                failure=failed.reason,
                detail=failed.detail,
                timings=_rounded(timings),
                log_tail=failed.log_tail,
                isolation=failed.isolation,
            )

    async def _run(
        self, job: JobBundle, progress: ProgressCallback, timings: dict[str, float], started: float
    ) -> JobResult:
        from adapters.tiny.model import load_checkpoint
        from adapters.tiny.scorer import EVAL_TEMPERATURE

        plan = detect_isolation(self.isolation)
        try:
            require_confinement(plan, unsafe=self.unsafe_no_sandbox, who="the CPU trainer")
        except WeakIsolation as exc:
            raise _Failed("config_error", str(exc), isolation=plan.mode) from None
        root = job.path
        try:
            config = load_job_config(root / "job.toml")
        except (JobConfigError, OSError) as exc:
            raise _Failed("config_error", str(exc)) from exc
        budget, spec_temperature, spec_eval_size = _spec_limits(root)
        dev_eval = _multi_job(root)  # a multi-job episode's job is also scored on the dev split, for the agent
        temperature = self.eval_temperature or spec_temperature or EVAL_TEMPERATURE
        # The task spec's eval size caps the hidden set scored (the replica's specs ask for a small one); the
        # trainer's eval_limit option, when set, wins.
        limit = self.eval_limit if self.eval_limit is not None else spec_eval_size
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
        settings = _capped(settings, self.max_steps, self.batch_size)
        torch.set_num_threads(settings.threads)

        phase = time.monotonic()
        try:
            ckpt = load_checkpoint(settings.model)
        except (FileNotFoundError, KeyError) as exc:
            raise _Failed("config_error", f"job.toml: [prime_rl].model = {settings.model!r}: {exc}") from exc
        assert ckpt.path is not None  # loaded from a directory
        base_dir: Path = ckpt.path
        env_src = (root / config.env.path).resolve()
        if not env_src.is_relative_to(root.resolve()):  # job.toml is agent-written: stay in the bundle
            raise _Failed("config_error", f"job.toml: [env].path = {config.env.path!r}: outside the job bundle")
        env_config: dict[str, Any] = {"num_tasks": config.env.num_tasks} if config.env.num_tasks else {}
        timings["setup"] = time.monotonic() - phase

        await progress(Progress(phase="pre_score", message=f"scoring {ckpt.name} on the {job.family} hidden eval"))

        async def pre_score() -> tuple[Any, str | None, str, dict[str, float]]:
            phase = time.monotonic()
            pre, key, taken = await self._memo_score("hidden", ckpt, job.family, temperature, limit)
            dev: dict[str, float] = {}
            if dev_eval:
                dev_pre, _, _ = await self._memo_score("dev", ckpt, job.family, temperature, self.eval_limit)
                dev["dev_pre"] = dev_pre.score
            timings["pre_score"] = time.monotonic() - phase
            note = _taken_note(taken, "this base's score")
            await progress(Progress(phase="pre_score", reward=pre.score, message=f"pre {pre.score:.3f}{note}"))
            return pre, key, note, dev

        # The pre-score and the training are independent (both start from the base checkpoint; the child trains
        # its own copy), so they run at once: on a 2-core machine the child's start-up (torch, transformers and
        # verifiers imports inside the sandbox) and its first steps overlap the scoring instead of waiting for it.
        # The post-score's reserve inside the time budget therefore cannot be sized from the pre-score's duration
        # (not known yet): a quarter of the budget is kept for it (at least 30 s).
        deadline = None if budget is None else started + budget - max(30.0, 0.25 * budget) - 5.0

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

        scoring = asyncio.create_task(pre_score())  # in this process, while the child starts (or the zygote)
        try:
            zygote, cold_because = await self._zygote(plan)
            work = make_root(zygote.spool if zygote is not None else self.work_root)
        except BaseException:
            scoring.cancel()
            raise
        try:
            try:

                async def train_here(zygote: TrainZygote | None) -> ChildOutcome:
                    return await train_in_child(
                        plan=plan,
                        root=work,
                        env_src=env_src,
                        checkpoint=base_dir,
                        env_id=config.env.id,
                        env_config=env_config,
                        family=job.family,
                        settings=settings,
                        deadline_at=deadline,
                        kill_grace_s=self.kill_grace_s,
                        limits=self.limits,
                        on_step=on_step,
                        zygote=zygote,
                    )

                try:
                    trained = await train_here(zygote)
                except ZygoteUnavailable as exc:  # the fork was refused: nothing of the child ran; go cold
                    cold_because = f"warm path unavailable: {exc}"
                    log.warning("cpu_trainer.warm_fallback", reason=str(exc))
                    await asyncio.to_thread(shutil.rmtree, work, True)
                    work = make_root(self.work_root)
                    trained = await train_here(None)
                trained = msgspec.structs.replace(trained, path_note=cold_because)
            except TrainingFailed as exc:
                scoring.cancel()
                raise _Failed(exc.reason, exc.detail, isolation=exc.isolation, log_tail=exc.log_tail) from None
            except BaseException:
                scoring.cancel()
                raise
            pre, pre_key, pre_note, dev = await scoring
            report = trained.report
            timings["train_setup"] = max(0.0, trained.wall_seconds - report.rollout_seconds - report.learn_seconds)
            timings["rollouts"] = report.rollout_seconds
            timings["learning"] = report.learn_seconds
            timings["train_cpu"] = trained.cpu_seconds  # the training child's CPU-s (start-up included)

            await progress(Progress(phase="post_score", message=f"scoring the trained model ({report.stop_reason})"))
            phase = time.monotonic()
            tuned = await self._load_trained(ckpt.path, trained)
            # Scoring is seeded and deterministic, so weights scored before score what they scored then: a job
            # whose training changed nothing (no signal, or rolled back) ends with the base's weights, and jobs
            # with the same job.toml, env and base train to the same weights. The memo finds them by their bytes.
            post, post_key, taken = await self._memo_score(
                "hidden", tuned, job.family, temperature, limit, isolation=trained.isolation
            )
            if post_key is not None and post_key == pre_key:
                post_note = " (the weights are the base's: its score)"
            else:
                post_note = _taken_note(taken, "these weights' score")
            if dev_eval:
                dev_post, _, _ = await self._memo_score(
                    "dev", tuned, job.family, temperature, self.eval_limit, isolation=trained.isolation
                )
                dev["dev_post"] = dev_post.score
        finally:
            if self.work_root is None:
                await asyncio.to_thread(shutil.rmtree, work, True)
        timings["post_score"] = time.monotonic() - phase
        timings["total"] = time.monotonic() - started
        await progress(Progress(phase="post_score", reward=post.score, message=f"post {post.score:.3f}{post_note}"))
        return JobResult(
            job_id=job.job_id,
            ok=True,
            pre=pre.score,
            post=post.score,
            detail=_detail(settings, report, trained, {"pre": pre_note, "post": post_note}),
            train_seconds=report.rollout_seconds + report.learn_seconds,
            timings=_rounded(timings),
            metrics=_metrics(settings, report) | dev,
            log_tail="\n".join(_step_line(s) for s in report.steps[-20:]),
            sampling=f"T={post.temperature:g}, top_p={post.top_p:g}, n={post.n}, seed={post.seed}, "
            f"max_turns={post.max_turns}, max_tokens={post.max_tokens}",
            isolation=trained.isolation,
            steps_done=len(report.steps),
            steps_total=settings.max_steps,
            stop_reason=report.stop_reason,
            eval_n=post.n,
        )

    async def _zygote(self, plan: IsolationPlan) -> tuple[TrainZygote | None, str]:
        """This process's ready training zygote, or None and why the job runs cold."""
        if self.child_path == "cold":
            return None, "cold path asked for"
        try:
            zygote = zygote_for(plan, self.work_root, threads=self.threads)
            await zygote.ensure()
        except (ZygoteUnavailable, OSError) as exc:  # OSError: bubblewrap could not even be started
            log.warning("cpu_trainer.warm_unavailable", reason=str(exc))
            return None, f"warm path unavailable: {exc}"
        return zygote, ""

    async def _load_trained(self, base: Path, trained: ChildOutcome) -> Any:
        """A fresh copy of the base checkpoint with the child's weights: a safetensors file, read as data."""
        from safetensors.torch import load_model

        from adapters.tiny.model import load_checkpoint

        def load() -> Any:
            limit = 4 * (base / "model.safetensors").stat().st_size + (1 << 20)
            size = trained.weights.stat().st_size
            if size > limit:
                raise ValueError(f"{size} bytes, more than a checkpoint of this model can be")
            ckpt = load_checkpoint(base)
            load_model(ckpt.model, str(trained.weights), strict=True)
            ckpt.model.train(False)
            return ckpt

        try:
            return await asyncio.to_thread(load)
        except Exception as exc:
            raise _Failed(
                "trainer_crash",
                f"the trained weights cannot be loaded: {type(exc).__name__}: {exc}",
                isolation=trained.isolation,
            ) from exc

    async def _memo_score(
        self,
        split: Literal["hidden", "dev"],
        ckpt: Any,
        family: str,
        temperature: float,
        limit: int | None,
        *,
        isolation: str = "",
    ) -> tuple[Any, str | None, Literal["", "pod", "machine"]]:
        """The loaded checkpoint's score, its memo key (None: not memoisable here) and where it was taken: from
        this pod's earlier jobs, this machine's memo (adapters.tiny.score_memo), or "" when scored now."""
        try:
            key: str | None = await asyncio.to_thread(
                memo_key, ckpt, split=split, family=family, temperature=temperature, seed=self.eval_seed, limit=limit
            )
        except Exception:  # no eval key or no directory here: the scoring below reports it, unmemoised
            key = None
        if key is not None and key in self._scores:
            return self._scores[key], key, "pod"
        found = None if key is None else await asyncio.to_thread(self.score_memo.get, key)
        taken: Literal["", "pod", "machine"] = "machine" if found is not None else ""
        if found is None:
            if split == "hidden":
                found = await self._score(ckpt, family, temperature, limit, isolation=isolation)
            else:
                found = await self._score_dev(ckpt, family, temperature)
            if key is not None:
                await asyncio.to_thread(self.score_memo.put, key, found)
        if key is not None:
            self._scores[key] = found
        return found, key, taken

    async def _score_dev(self, ckpt: Any, family: str, temperature: float) -> Any:
        """The dev-split score a multi-job episode's ``job_result`` shows (never the hidden score)."""
        from adapters.tiny.scorer import score_dev

        try:
            return await asyncio.to_thread(
                score_dev, ckpt, family, temperature=temperature, seed=self.eval_seed, limit=self.eval_limit
            )
        except Exception as exc:
            raise _Failed("scoring_error", f"dev eval of {family}: {type(exc).__name__}: {exc}") from exc

    async def _score(
        self, ckpt: Any, family: str, temperature: float, limit: int | None, *, isolation: str = ""
    ) -> Any:
        from adapters.tiny.scorer import score_hidden

        try:
            return await asyncio.to_thread(
                score_hidden, ckpt, family, temperature=temperature, seed=self.eval_seed, limit=limit
            )
        except Exception as exc:
            raise _Failed(
                "scoring_error", f"hidden eval of {family}: {type(exc).__name__}: {exc}", isolation=isolation
            ) from exc


def _taken_note(taken: Literal["", "pod", "machine"], what: str) -> str:
    """`` (<what>, taken ...)`` for a score taken from the pod's or the machine's memo; "" for one scored now."""
    where = {"pod": "by an earlier job on this pod", "machine": "before on this machine"}.get(taken)
    return f" ({what}, taken {where})" if where else ""


def _capped(settings: CpuTrainSettings, max_steps: int | None, batch_size: int | None) -> CpuTrainSettings:
    """The job's settings with the trainer's smoke-run caps applied (and said so in the notes)."""
    notes = list(settings.notes)
    steps, batch = settings.max_steps, settings.batch_size
    if max_steps is not None and max_steps < steps:
        notes.append(f"max_steps {steps} capped to {max_steps} by the trainer (smoke run)")
        steps = max_steps
    if batch_size is not None and batch_size < batch:
        # Whole groups only: the cap rounds down to a multiple of group_size (at least one group).
        capped = max(settings.group_size, batch_size - batch_size % settings.group_size)
        notes.append(f"batch_size {batch} capped to {capped} by the trainer (smoke run)")
        batch = capped
    return msgspec.structs.replace(settings, max_steps=steps, batch_size=batch, notes=notes)


def _spec_limits(root: Path) -> tuple[float | None, float | None, int | None]:
    """(time budget in seconds, eval temperature, eval size) from ``task_spec.json``, when the bundle has one."""
    path = root / "task_spec.json"
    if not path.exists():
        return None, None, None
    try:
        # The bundle's copy is named task_spec.json, not <name>.json, so load_spec's file-name check does not apply.
        spec = msgspec.json.decode(path.read_bytes(), type=TaskSpec)
    except (msgspec.DecodeError, OSError) as exc:
        raise _Failed("config_error", f"{path}: {exc}") from exc
    errors = validate_spec(spec)
    if errors:
        raise _Failed("config_error", f"{path}: " + "; ".join(errors))
    return float(spec.bounds.time_budget_s), float(spec.eval.temperature), spec.eval.size


def _multi_job(root: Path) -> bool:
    """Whether the bundle's task spec allows more than one job per episode (then the dev split is scored)."""
    path = root / "task_spec.json"
    if not path.exists():
        return False
    spec = msgspec.json.decode(path.read_bytes(), type=TaskSpec)  # _spec_limits decoded and checked it already
    return spec.episode is not None and spec.episode.max_jobs > 1


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


def _detail(settings: CpuTrainSettings, report: TrainReport, trained: ChildOutcome, taken: Mapping[str, str]) -> str:
    lines = [f"stopped: {report.stop_reason} after {len(report.steps)} of {settings.max_steps} steps"]
    lines += settings.notes
    # Where a score was taken rather than scored, the result says so (the log keeps the result document).
    lines += [f"{which}{note}" for which, note in taken.items() if note]
    lines.append(isolation_line(trained))
    return "; ".join(lines)


def isolation_line(trained: ChildOutcome) -> str:
    """``training isolation: bwrap, uid 61234, rlimits(...), key sealed`` (+ why weaker, + UNSAFE when so)."""
    mib = {"RLIMIT_AS": "as", "RLIMIT_FSIZE": "fsize"}
    limits = " ".join(
        f"{mib[k]}={v >> 20}MiB" if k in mib else f"{k.removeprefix('RLIMIT_').lower()}={v}"
        for k, v in sorted(trained.rlimits.items())
    )
    who = f"uid {trained.uid}" if trained.uid is not None else "the engine's uid"
    text = f"training isolation: {trained.isolation}, {who}, rlimits({limits}), scrubbed env, key sealed"
    if trained.path == "warm":
        text += ", warm path (a confined fork of the training zygote: namespaces, mounts and uid of its own)"
    else:
        text += f", cold path ({trained.path_note or 'a bubblewrap sandbox and interpreter of its own'})"
    if trained.note:
        text += f" [weaker because: {trained.note}]"
    if trained.isolation != "bwrap":
        text += " [UNSAFE: run without a sandbox by explicit opt-in]"
    return text


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
    "isolation": str,
    "work_root": Path,
    "kill_grace_s": float,
    "max_steps": int,
    "batch_size": int,
    "unsafe_no_sandbox": str,
    "child_path": str,
    "score_memo": str,
}
_CHILD_PATHS = ("warm", "cold")
_ISOLATIONS = ("auto", "bwrap", "unshare", "none")


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
    if kwargs.get("isolation", "auto") not in _ISOLATIONS:
        raise ValueError(f"cpu trainer: isolation={kwargs['isolation']!r}; expected one of {_ISOLATIONS}")
    if "isolation" in kwargs:
        kwargs["isolation"] = cast(Mode, kwargs["isolation"])
    if "score_memo" in kwargs:  # a directory, or "off"
        kwargs["score_memo"] = ScoreMemo.at(kwargs["score_memo"])
    if "unsafe_no_sandbox" in kwargs:
        flag = kwargs["unsafe_no_sandbox"].lower()
        if flag not in ("0", "1", "true", "false"):
            raise ValueError(f"cpu trainer: option unsafe_no_sandbox={flag!r} is not one of 0, 1, true, false")
        kwargs["unsafe_no_sandbox"] = flag in ("1", "true")
    return CpuTrainer(**kwargs)
