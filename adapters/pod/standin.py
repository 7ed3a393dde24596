"""A stand-in inner trainer (``--trainer standin``): no model, deterministic scores, for demos and fleet tests.

It exercises everything around training (bundle transport, progress, timings, results) until a real trainer
is plugged in: pre and post scores are derived from a hash of the bundle's files, so the same bundle always
scores the same, and every result says ``standin`` in its sampling note and metrics. It does read
``job.toml`` (a bundle without one fails as ``config_error``, like a real trainer would).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path

from handlers.ports.inner_trainer import JobBundle, JobResult, Progress, ProgressCallback

__all__ = ["StandinTrainer", "make_trainer"]


def _digest(root: Path) -> bytes:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.digest()


class StandinTrainer:
    """``steps`` progress steps of ``step_s`` seconds each; scores in [0, 1] from the bundle hash."""

    name = "standin"

    def __init__(self, *, steps: int = 4, step_s: float = 0.05) -> None:
        if steps < 1 or step_s < 0:
            raise ValueError(f"standin: steps must be >= 1 and step_s >= 0 (got steps={steps}, step_s={step_s})")
        self.steps = steps
        self.step_s = step_s

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        toml = job.path / "job.toml"
        try:
            tomllib.loads(toml.read_text())
        except FileNotFoundError:
            return JobResult(job_id=job.job_id, ok=False, failure="config_error", detail="job.toml: missing")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            return JobResult(job_id=job.job_id, ok=False, failure="config_error", detail=f"job.toml: {exc}")
        d = await asyncio.to_thread(_digest, job.path)
        pre = round(0.05 + 0.30 * d[0] / 255, 4)
        post = round(min(1.0, max(0.0, pre - 0.05 + 0.35 * d[1] / 255)), 4)
        timings: dict[str, float] = {}

        t = time.monotonic()
        await progress(Progress(phase="pre_score", message="standin: hashed the bundle"))
        timings["pre_score"] = time.monotonic() - t
        t = time.monotonic()
        for step in range(1, self.steps + 1):
            await asyncio.sleep(self.step_s)
            frac = step / self.steps
            await progress(
                Progress(
                    phase="train",
                    step=step,
                    total_steps=self.steps,
                    reward=round(pre + (post - pre) * frac, 4),
                    loss=round(1.0 - 0.5 * frac, 4),
                )
            )
        timings["train"] = time.monotonic() - t
        t = time.monotonic()
        await progress(Progress(phase="post_score", message="standin: scored"))
        timings["post_score"] = time.monotonic() - t
        return JobResult(
            job_id=job.job_id,
            ok=True,
            pre=pre,
            post=post,
            train_seconds=round(timings["train"], 6),
            timings={k: round(v, 6) for k, v in timings.items()},
            metrics={"standin": 1.0, "steps": float(self.steps)},
            log_tail=f"standin trainer: {self.steps} steps, pre={pre} post={post} (no model was trained)",
            sampling="standin: scores derived from the bundle hash, no model",
        )


def make_trainer(options: Mapping[str, str]) -> StandinTrainer:
    """The registry's factory: ``--trainer-opt steps=N --trainer-opt step_s=S``."""
    unknown = sorted(set(options) - {"steps", "step_s"})
    if unknown:
        raise ValueError(f"standin trainer: unknown option(s) {unknown}; known: ['step_s', 'steps']")
    try:
        return StandinTrainer(steps=int(options.get("steps", 4)), step_s=float(options.get("step_s", 0.05)))
    except ValueError as exc:
        raise ValueError(f"standin trainer: {exc}") from None
