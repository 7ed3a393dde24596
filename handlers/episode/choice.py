"""The CPU replica's choice space: what its trainer agent decides in one episode, and the job.toml of each choice.

In the replica (docs/replica.md) every episode's workspace holds four complete verifiers packages,
``envs/correct``, ``envs/partial``, ``envs/everything`` and ``envs/wrong``, identical but for the rubric (the
right answer scores 1; partial credit; everything scores 1; wrong answers score 1). The agent's job.toml picks a
base model (``[prime_rl] model``), a learning rate (``[prime_rl] learning_rate``, one of two) and one of those
packages (``[env] path``); every other line is fixed (:data:`FIXED`, the same for every choice, shown in the
replica's INSTRUCTIONS.md). So a job is one of ``len(MODELS) * len(LEARNING_RATES) * len(RUBRICS)`` choices,
which the report counts and the grid (benchmarks/replica_grid.py) scores.

Pure: no torch, no file access; the job.toml text is built from the task spec alone.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import msgspec

from families.spec import TaskSpec
from handlers.episode.job_config import JobConfig
from handlers.episode.setup import env_id_for

__all__ = [
    "FIXED",
    "LEARNING_RATES",
    "MODELS",
    "RUBRICS",
    "Choice",
    "ChoiceError",
    "all_choices",
    "choice_of",
    "job_text",
]

MODELS: tuple[str, ...] = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")
#: The two learning rates a replica job may train at, as job.toml writes them. Like the seed's ``[prime_rl]``
#: knobs, one is right for the job and one is not: at 3e-5 four steps overshoot and every rubric with a gradient
#: lowers the hidden-eval score (docs/replica.md, the grid), at 1e-5 the rubrics separate.
LEARNING_RATES: tuple[str, ...] = ("1e-05", "3e-05")
RUBRICS: tuple[str, ...] = ("correct", "partial", "everything", "wrong")

#: The fixed ``[prime_rl]`` lines of every replica job, in job.toml order (sized in docs/replica.md: a job of
#: about 15-25 CPU-s on the tiny inner models, long enough for the rubrics' hidden-eval uplifts to differ).
FIXED: tuple[tuple[str, str], ...] = (
    ("max_steps", "4"),
    ("batch_size", "16"),
    ("group_size", "4"),
    ("temperature", "1.0"),
    ("max_tokens", "64"),
    ("seq_len", "1024"),
    ("max_turns", "8"),
    ("optimizer", '"adamw"'),
    ("algorithm", '"grpo"'),
    ("scheduler", '"constant"'),
    ("loss", '"default"'),
)


class ChoiceError(ValueError):
    """A job.toml that is not one of the replica's choices; the message names the key."""


class Choice(msgspec.Struct, frozen=True):
    """One base model, one learning rate and one rubric package of the replica's template."""

    model: str
    rubric: str
    learning_rate: str  # as job.toml writes it: one of LEARNING_RATES

    @property
    def label(self) -> str:
        """Short and stable, for tables and plots: ``"1.7B/correct/1e-05"``."""
        return f"{self.model.rsplit('-', 1)[-1]}/{self.rubric}/{self.learning_rate}"

    @property
    def env_path(self) -> str:
        return f"envs/{self.rubric}"


def all_choices() -> list[Choice]:
    """Every choice, models outer, then rubrics, learning rates inner, in the declared order."""
    return [Choice(model, rubric, lr) for model in MODELS for rubric in RUBRICS for lr in LEARNING_RATES]


def choice_of(job: JobConfig) -> Choice:
    """The choice a parsed job.toml made (the rubric is the last part of ``[env] path``; the learning rate is
    compared as a number, so ``1e-5`` and ``0.00001`` are the choice ``1e-05``)."""
    model = job.prime_rl.model
    if model not in MODELS:
        raise ChoiceError(f"job.toml: [prime_rl].model = {model!r}: not one of the replica's models {MODELS}")
    lr = next((lr for lr in LEARNING_RATES if float(lr) == job.prime_rl.learning_rate), None)
    if lr is None:
        raise ChoiceError(
            f"job.toml: [prime_rl].learning_rate = {job.prime_rl.learning_rate!r}: not one of the replica's "
            f"learning rates ({', '.join(LEARNING_RATES)})"
        )
    parts = PurePosixPath(job.env.path.strip().rstrip("/")).parts
    rubric = parts[-1] if parts else ""
    if rubric not in RUBRICS:
        raise ChoiceError(
            f"job.toml: [env].path = {job.env.path!r}: not one of the replica's envs "
            f"({', '.join('envs/' + r for r in RUBRICS)})"
        )
    return Choice(model, rubric, lr)


def job_text(choice: Choice, spec: TaskSpec) -> str:
    """The exact job.toml of ``choice`` for the task ``spec`` (the env id is the task's, as the template names it)."""
    if choice.model not in MODELS or choice.rubric not in RUBRICS or choice.learning_rate not in LEARNING_RATES:
        raise ChoiceError(f"not a replica choice: {choice.model!r} / {choice.rubric!r} / {choice.learning_rate!r}")
    lines = ["[prime_rl]", f'model = "{choice.model}"', f"learning_rate = {choice.learning_rate}"]
    lines += [f"{key} = {value}" for key, value in FIXED]
    lines += ["", "[env]", f'id = "{env_id_for(spec)}"', f'path = "{choice.env_path}"', ""]
    return "\n".join(lines)
