"""The embedded inner trainer: GRPO with a tiny Qwen3-architecture model on a CPU, on a verifiers v1 env.

:class:`CpuTrainer` implements the inner-trainer port (``handlers.ports.inner_trainer.InnerTrainer``): a job bundle
in (``job.toml`` + the agent's env package + ``task_spec.json``), a :class:`~handlers.ports.inner_trainer.JobResult`
out (hidden-eval ``pre`` and ``post`` scores, timings split into setup / pre_score / rollouts / learning /
post_score, per-step progress callbacks with the batch's mean reward and the loss).

The pieces, usable on their own (the benchmark uses them directly):

- :func:`settings_from_job`: the job's ``[prime_rl]`` values -> :class:`CpuTrainSettings` (what applies on a
  CPU; the rest is mapped and noted);
- :func:`train`: the loop (rollouts through ``adapters.inproc`` with ``adapters.tiny``'s batching policy
  sampling and keeping token ids + log-probs, rewards from the env's rubric, group-relative advantages,
  a clipped importance-sampling update, optional KL to the base, a collapse guard);
- :func:`grpo_update` / :func:`group_advantages`: the update itself.

:class:`CpuTrainer` runs the agent's env code only in a confined child process (``_confine``, ``_child``,
``_supervise``: the probe's bubblewrap sandbox where available, sealed from the installation key; by default a
confined fork of the process's training zygote, ``_warm`` and ``_zygote``, which imported the stack once) and scores
in its own process, which never imports the env. :func:`train` itself runs env code in the calling process:
only the child (and tests with trusted fixture envs) call it directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from ._confine import ChildLimits
    from ._grpo import EpisodeSample, TurnSample, UpdateStats, group_advantages, grpo_update, token_loss
    from ._loop import EnvFailure, StepRecord, TrainReport, train
    from ._settings import DEFAULT_LR_SCALE, CpuTrainSettings, settings_from_job
    from ._trainer import CpuTrainer, make_trainer
    from ._warm import close_zygotes, zygote_for

# Lazy: importing one light piece (``_confine``, ``_settings``) must not load torch, transformers and verifiers
# (~10 CPU-s on a busy machine): the pod agent, the CLI and test collection only pay for what they use.
_WHERE = {
    "ChildLimits": "_confine",
    "EpisodeSample": "_grpo",
    "TurnSample": "_grpo",
    "UpdateStats": "_grpo",
    "group_advantages": "_grpo",
    "grpo_update": "_grpo",
    "token_loss": "_grpo",
    "EnvFailure": "_loop",
    "StepRecord": "_loop",
    "TrainReport": "_loop",
    "train": "_loop",
    "DEFAULT_LR_SCALE": "_settings",
    "CpuTrainSettings": "_settings",
    "settings_from_job": "_settings",
    "CpuTrainer": "_trainer",
    "make_trainer": "_trainer",
    "close_zygotes": "_warm",
    "zygote_for": "_warm",
}

__getattr__ = lazy_exports(__name__, _WHERE)


__all__ = [
    "DEFAULT_LR_SCALE",
    "ChildLimits",
    "CpuTrainSettings",
    "CpuTrainer",
    "EnvFailure",
    "EpisodeSample",
    "StepRecord",
    "TrainReport",
    "TurnSample",
    "UpdateStats",
    "close_zygotes",
    "group_advantages",
    "grpo_update",
    "make_trainer",
    "settings_from_job",
    "token_loss",
    "train",
    "zygote_for",
]
