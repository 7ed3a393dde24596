"""The inner-trainer port: ``run(job) -> result`` with progress callbacks.

The pod agent calls this one port. Implementations: the embedded CPU trainer (tiny Qwen3-architecture
model, ``adapters/tiny``) and prime-rl + vLLM on a GPU pod (``adapters/prime_rl``). A job bundle is a
directory: the agent's env package, ``job.toml``, and the task spec; scoring data never come with it
(they reach the scoring phase only after training has finished).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, Protocol

import msgspec

__all__ = ["FailureReason", "InnerTrainer", "JobBundle", "JobResult", "Progress", "ProgressCallback"]

FailureReason = Literal["config_error", "env_crash", "oom", "timeout", "trainer_crash", "scoring_error", "cancelled"]


class JobBundle(msgspec.Struct, frozen=True, kw_only=True):
    """Where a job's files are, unpacked: ``root/job.toml``, ``root/<env path>/``, ``root/task_spec.json``."""

    job_id: str
    family: str
    root: str

    @property
    def path(self) -> Path:
        return Path(self.root)


class Progress(msgspec.Struct, frozen=True, kw_only=True):
    phase: Literal["pre_score", "train", "post_score"]
    step: int = 0
    total_steps: int = 0
    reward: float | None = None
    loss: float | None = None
    message: str = ""


ProgressCallback = Callable[[Progress], Awaitable[None]]


class JobResult(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    ok: bool
    pre: float | None = None  # hidden-eval score of the base model (informational: reward uses best_pre)
    post: float | None = None  # hidden-eval score after training
    failure: FailureReason | None = None
    detail: str = ""
    train_seconds: float = 0.0
    timings: dict[str, float] = {}  # phase -> seconds
    metrics: dict[str, float] = {}
    log_tail: str = ""
    sampling: str = ""  # how the hidden eval sampled (e.g. "T=1.0, n=200"): scores state their sampling
    isolation: str = ""  # how the agent's code was confined while it trained (e.g. "bwrap"); "" if not stated
    # How far training got: a job cut short (deadline, no gradient signal, collapse) says so, with its cause.
    steps_done: int = 0
    steps_total: int = 0  # the steps the job asked for (after any trainer cap); 0: not stated
    stop_reason: str = ""  # max_steps | deadline | no_signal | collapsed | ... ("" if not stated)
    eval_n: int = 0  # hidden tasks behind each of pre and post (0: not stated)

    @property
    def stopped_early(self) -> bool:
        return self.ok and self.steps_total > 0 and self.steps_done < self.steps_total


class InnerTrainer(Protocol):
    name: str

    async def run(self, job: JobBundle, progress: ProgressCallback) -> JobResult:
        """Train and score ``job``. A failure is returned classified (``ok=False``, ``failure``, ``detail``);
        an ok result has ``pre`` and ``post`` in [0, 1] and says how they were sampled (``sampling``).
        (The pod agent turns anything raised into a ``trainer_crash``.)"""
        ...
