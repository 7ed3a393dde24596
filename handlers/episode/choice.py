"""The CPU replica's choice space: what its trainer agent decides in one episode, and the job.toml of each choice.

In the replica (docs/replica.md) every episode's workspace holds four complete verifiers packages,
``envs/correct``, ``envs/partial``, ``envs/everything`` and ``envs/wrong``, identical but for the rubric (the
right answer scores 1; partial credit; everything scores 1; wrong answers score 1). The agent's job.toml picks a
base model (``[prime_rl] model``) and one of those packages (``[env] path``); every other line is fixed
(:data:`FIXED`, the same for every choice, shown in the replica's INSTRUCTIONS.md). So a job is one of
``len(MODELS) * len(RUBRICS)`` choices, which the report counts and the grid (benchmarks/replica_grid.py) scores.

Pure: no torch, no file access; the job.toml text is built from the task spec alone.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import msgspec

from families.spec import TaskSpec
from handlers.episode.job_config import JobConfig
from handlers.episode.setup import env_id_for

__all__ = ["FIXED", "MODELS", "RUBRICS", "Choice", "ChoiceError", "all_choices", "choice_of", "job_text"]

MODELS: tuple[str, ...] = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")
RUBRICS: tuple[str, ...] = ("correct", "partial", "everything", "wrong")

#: The fixed ``[prime_rl]`` lines of every replica job, in job.toml order (sized in docs/replica.md: a job of
#: about 15-25 CPU-s on the tiny inner models, long enough for the rubrics' hidden-eval uplifts to differ).
FIXED: tuple[tuple[str, str], ...] = (
    ("learning_rate", "1e-05"),
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
    """One base model and one rubric package of the replica's template."""

    model: str
    rubric: str

    @property
    def label(self) -> str:
        """Short and stable, for tables and plots: ``"1.7B/correct"``."""
        return f"{self.model.rsplit('-', 1)[-1]}/{self.rubric}"

    @property
    def env_path(self) -> str:
        return f"envs/{self.rubric}"


def all_choices() -> list[Choice]:
    """Every choice, models outer and rubrics inner, in the declared order."""
    return [Choice(model, rubric) for model in MODELS for rubric in RUBRICS]


def choice_of(job: JobConfig) -> Choice:
    """The choice a parsed job.toml made (the rubric is the last part of ``[env] path``)."""
    model = job.prime_rl.model
    if model not in MODELS:
        raise ChoiceError(f"job.toml: [prime_rl].model = {model!r}: not one of the replica's models {MODELS}")
    parts = PurePosixPath(job.env.path.strip().rstrip("/")).parts
    rubric = parts[-1] if parts else ""
    if rubric not in RUBRICS:
        raise ChoiceError(
            f"job.toml: [env].path = {job.env.path!r}: not one of the replica's envs "
            f"({', '.join('envs/' + r for r in RUBRICS)})"
        )
    return Choice(model, rubric)


def job_text(choice: Choice, spec: TaskSpec) -> str:
    """The exact job.toml of ``choice`` for the task ``spec`` (the env id is the task's, as the template names it)."""
    if choice.model not in MODELS or choice.rubric not in RUBRICS:
        raise ChoiceError(f"not a replica choice: {choice.model!r} / {choice.rubric!r}")
    lines = ["[prime_rl]", f'model = "{choice.model}"']
    lines += [f"{key} = {value}" for key, value in FIXED]
    lines += ["", "[env]", f'id = "{env_id_for(spec)}"', f'path = "{choice.env_path}"', ""]
    return "\n".join(lines)
