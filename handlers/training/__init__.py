"""The outer loop's learning step, as pure functions read top to bottom (like tinker-cookbook's ``rl/train``):
config -> batch of tasks -> groups of episodes -> staleness -> advantages -> datums -> loss -> learner step.

Nothing here imports the Tinker SDK: datums are plain :class:`DatumSpec` structs that ``adapters/tinker``
turns into ``tinker.types.Datum``; the learner is reached through :class:`LearnerPort`.
"""

from __future__ import annotations

from .advantages import group_advantages
from .batch import TaskRef, draw_tasks
from .config import ConfigError, OuterConfig, load_config, parse_config
from .datums import DatumSpec, SampledTurn, trajectory_to_datums
from .episodes import EpisodeGroup, FinishedEpisode
from .loop import OuterLoop, RunEpisode
from .loss import LOSSES, loss_fn_config
from .port import LearnerPort, StepOutcome
from .projection import TrainingProjection, TrainingState, open_groups
from .staleness import StalenessSplit, split_by_staleness
from .step import StepResult, build_batch_datums, discard_stale, learner_step

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
