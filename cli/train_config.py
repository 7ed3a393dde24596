"""The run config of ``ait train`` (``examples/configs/<name>.toml``), validated on load; every error names the
file and the key.

Tables:

- ``[run]``: ``name`` (run id prefix), ``seed``.
- ``[outer]``: the outer loop (:class:`handlers.training.OuterConfig`): model, rank, lr, loss, group size,
  tasks per batch, staleness, concurrency, families, steps.
- ``[backend]``: ``kind = "tinker"`` (real Tinker; needs ``TINKER_API_KEY``) or ``"offline"``
  (adapters/tinker/offline.py: no network, LEARNS NOTHING; for smoke runs and tests); ``base_url`` (tinker).
- ``[agent]``: ``kind = "tinker"`` (the policy samples from the backend's sampler; needs the tinker backend)
  or ``"scripted"`` (replays ``<trajectories>/<family>_good.json``; with the offline backend it carries toy
  token ids so the learner has datums).
- ``[episode]``: ``task_spec`` (a path pattern with ``{family}``), ``max_turns``, ``max_attempts``,
  ``validator = "probe"`` (the sandboxed probe, seconds per submission) or ``"job_config"`` (job.toml
  against the task's bounds only, runs no agent code: fast, for smoke runs and the crash test).
- ``[inner]``: ``provider = "local"``, ``trainer`` (a pod trainer name, e.g. ``standin``), ``trainer_options``.
- ``[fleet]``: :class:`handlers.fleet.policy.FleetConfig` (default: ``ladder = ["local"]``, 2 pods).
- ``[budget]``: :class:`handlers.budget.rules.BudgetConfig` (the ledger defaults to ``<runs-root>/costs.jsonl``).
- ``[reward]``: :class:`handlers.reward.formula.RewardConfig`: the weights (``w_validation``, ``w_quality``,
  ``w_speed``), ``validation_decay``, the quality split and the no-submission reward (docs/reward.md). Every
  ``reward.computed`` event records the values it used, so ``ait replay`` shows them and ``--verify`` recomputes
  with them.
- ``[wandb]``: :class:`adapters.wandb_sink.WandbConfig` (``project``, ``entity``, ``mode``, ``dir``, ``tags``):
  the live W&B sink during ``ait train`` (docs/observability.md); off without the table.
- ``[baselines.<family>]``: ``"<model>" = best_pre`` frozen scores, when no baselines file has them (the
  standin trainer's scores are made up: so are the baselines a smoke config gives for it).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import msgspec

from adapters.wandb_sink import WandbConfig
from handlers.budget.rules import BudgetConfig
from handlers.fleet.policy import FleetConfig
from handlers.reward.formula import RewardConfig
from handlers.training import ConfigError, OuterConfig, parse_config

__all__ = ["AgentTable", "BackendTable", "EpisodeTable", "InnerTable", "RunConfig", "RunTable", "load_run_config"]

REPO = Path(__file__).resolve().parents[1]


class RunTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str = "train"
    seed: int = 0


class BackendTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: str = "tinker"
    base_url: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("tinker", "offline"):
            raise ValueError(f"kind: {self.kind!r} is not one of tinker, offline")


class AgentTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: str = "tinker"
    trajectories: str = "fixtures/trajectories"

    def __post_init__(self) -> None:
        if self.kind not in ("tinker", "scripted"):
            raise ValueError(f"kind: {self.kind!r} is not one of tinker, scripted")


class EpisodeTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    task_spec: str = "examples/tasks/{family}_v1.json"
    max_turns: int = 40
    max_attempts: int = 3
    validator: str = "probe"

    def __post_init__(self) -> None:
        if "{family}" not in self.task_spec:
            raise ValueError(f"task_spec: {self.task_spec!r} must contain {{family}}")
        if self.validator not in ("probe", "job_config"):
            raise ValueError(f"validator: {self.validator!r} is not one of probe, job_config")
        if self.max_turns < 1 or self.max_attempts < 1:
            raise ValueError("max_turns/max_attempts: must be >= 1")


class InnerTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    provider: str = "local"
    trainer: str = "standin"
    trainer_options: dict[str, str] = {}

    def __post_init__(self) -> None:
        if self.provider != "local":
            raise ValueError(f"provider: {self.provider!r}: only local is wired into ait train yet")


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    run: RunTable
    outer: OuterConfig
    backend: BackendTable
    agent: AgentTable
    episode: EpisodeTable
    inner: InnerTable
    fleet: FleetConfig
    budget: BudgetConfig
    baselines: dict[str, dict[str, float]]
    raw: dict[str, Any]  # the file as parsed: recorded in run.started
    reward: RewardConfig = RewardConfig()
    wandb: WandbConfig | None = None  # None: no live W&B sink
    # the file as parsed: recorded in run.started

    def spec_path(self, family: str) -> Path:
        p = Path(self.episode.task_spec.format(family=family))
        return p if p.is_absolute() else REPO / p

    def trajectory_path(self, family: str) -> Path:
        root = Path(self.agent.trajectories)
        return (root if root.is_absolute() else REPO / root) / f"{family}_good.json"


_TABLES: dict[str, type[msgspec.Struct]] = {
    "run": RunTable,
    "backend": BackendTable,
    "agent": AgentTable,
    "episode": EpisodeTable,
    "inner": InnerTable,
}
_KNOWN = {*_TABLES, "outer", "fleet", "budget", "baselines", "reward", "wandb"}


def _table(doc: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    return value


def parse_run_config(doc: dict[str, Any], *, source: str, runs_root: Path | None = None) -> RunConfig:
    unknown = sorted(set(doc) - _KNOWN)
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {unknown}; known: {sorted(_KNOWN)}")
    parts: dict[str, Any] = {}
    for name, cls in _TABLES.items():
        try:
            parts[name] = msgspec.convert(_table(doc, name, source), cls)
        except (msgspec.ValidationError, ValueError) as exc:
            raise ConfigError(f"{source}: [{name}] {exc}") from None
    outer = parse_config(_table(doc, "outer", source), source=source)
    try:
        fleet = FleetConfig.from_mapping(
            {"ladder": ("local",), "max_pods": 2, **_table(doc, "fleet", source)}, source=source
        )
        budget_table = dict(_table(doc, "budget", source))
        if runs_root is not None:
            budget_table.setdefault("ledger", str(runs_root / "costs.jsonl"))
        budget = BudgetConfig.from_mapping(budget_table, source=source)
        reward = RewardConfig.from_mapping(_table(doc, "reward", source), source=source)
        wandb = WandbConfig.from_mapping(_table(doc, "wandb", source), source=source) if "wandb" in doc else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    baselines: dict[str, dict[str, float]] = {}
    for family, scores in _table(doc, "baselines", source).items():
        if not isinstance(scores, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0.0 <= v <= 1.0 for v in scores.values()
        ):
            raise ConfigError(f"{source}: [baselines.{family}] must map model names to scores in [0, 1]")
        baselines[family] = {str(k): float(v) for k, v in scores.items()}
    cfg = RunConfig(
        source=source,
        outer=outer,
        fleet=fleet,
        budget=budget,
        baselines=baselines,
        raw=doc,
        reward=reward,
        wandb=wandb,
        **parts,
    )
    if cfg.agent.kind == "tinker" and cfg.backend.kind != "tinker":
        raise ConfigError(f"{source}: [agent] kind = 'tinker' needs [backend] kind = 'tinker'")
    if cfg.backend.kind == "tinker" and cfg.agent.kind != "tinker":
        raise ConfigError(
            f"{source}: [backend] kind = 'tinker' trains the agent it samples: set [agent] kind = 'tinker'"
        )
    for family in outer.families:
        if not cfg.spec_path(family).is_file():
            raise ConfigError(f"{source}: [episode] task_spec: no file {cfg.spec_path(family)} for family {family}")
        if cfg.agent.kind == "scripted" and not cfg.trajectory_path(family).is_file():
            raise ConfigError(f"{source}: [agent] trajectories: no {cfg.trajectory_path(family)} for family {family}")
    return cfg


def load_run_config(path: Path | str, *, runs_root: Path | None = None) -> RunConfig:
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    return parse_run_config(doc, source=str(p), runs_root=runs_root)
