"""The outer loop's learning step, as pure functions read top to bottom (like tinker-cookbook's ``rl/train``):
config -> batch of tasks -> groups of episodes -> staleness -> advantages -> datums -> loss -> learner step.

Nothing here imports the Tinker SDK: datums are plain :class:`DatumSpec` structs that ``adapters/tinker``
turns into ``tinker.types.Datum``; the learner is reached through :class:`LearnerPort`.
"""

from __future__ import annotations

from handlers.ports.learner import LearnerPort, StepOutcome
from handlers.training.advantages import group_advantages
from handlers.training.batch import TaskRef, draw_tasks
from handlers.training.config import ConfigError, OuterConfig, load_config, parse_config
from handlers.training.datums import DatumSpec, SampledTurn, trajectory_to_datums
from handlers.training.episodes import EpisodeGroup, FinishedEpisode
from handlers.training.loop import OuterLoop, RunEpisode
from handlers.training.loss import LOSSES, loss_fn_config
from handlers.training.projection import TrainingProjection, TrainingState, open_groups
from handlers.training.staleness import StalenessSplit, split_by_staleness
from handlers.training.step import StepResult, build_batch_datums, discard_stale, learner_step

__all__ = [
    "LOSSES",
    "ConfigError",
    "DatumSpec",
    "EpisodeGroup",
    "FinishedEpisode",
    "LearnerPort",
    "OuterConfig",
    "OuterLoop",
    "RunEpisode",
    "SampledTurn",
    "StalenessSplit",
    "StepOutcome",
    "StepResult",
    "TaskRef",
    "TrainingProjection",
    "TrainingState",
    "build_batch_datums",
    "discard_stale",
    "draw_tasks",
    "group_advantages",
    "learner_step",
    "load_config",
    "loss_fn_config",
    "open_groups",
    "parse_config",
    "split_by_staleness",
    "trajectory_to_datums",
]
