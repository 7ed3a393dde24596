"""The run config of ``ait train`` (``examples/configs/<name>.toml``), validated on load; every error is one line
naming the file, the line (where the text shows the key) and the key. Types are strict: ``max_pods = "12"`` is
a string where a number belongs, never coerced; a byte that is not UTF-8 is an error naming its line.

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
- ``[fleet]``: :class:`handlers.fleet_policy.FleetConfig` (default: ``ladder = ["local"]``, 2 pods).
- ``[budget]``: :class:`handlers.budget.BudgetConfig` (the ledger defaults to ``<runs-root>/costs.jsonl``).
- ``[baselines.<family>]``: ``"<model>" = best_pre`` frozen scores, when no baselines file has them (the
  standin trainer's scores are made up: so are the baselines a smoke config gives for it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from engine.tomlfile import TomlError, decode_toml, key_line
from handlers.budget import BudgetConfig
from handlers.fleet_policy import FleetConfig
from handlers.training import ConfigError, OuterConfig, parse_config

__all__ = ["AgentTable", "BackendTable", "EpisodeTable", "InnerTable", "RunConfig", "RunTable", "load_run_config"]

REPO = Path(__file__).resolve().parents[2]


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
_KNOWN = {*_TABLES, "outer", "fleet", "budget", "baselines"}


def _table(doc: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    return value


_AT_FIELD = re.compile(r"\s*- at `\$\.([^`]+)`")
_NAMED = (
    r"^(\w+)(?:\[[^\]]*\])*: ",  # msgspec's "- at `$.max_pods`", said first ("max_pods: ...")
    r"\b{table}\.(\w+)",  # __post_init__ / from_mapping: "fleet.tick_s must be ..."
    r"unknown (?:key\(s\)|field)s? \[?['`](\w+)",  # "unknown key(s) ['max_podz']", "unknown field `x`"
    r"missing required field `(\w+)`",
    r"\] (\w+):",  # "[outer] loss_fn: ..."
    r"^(\w+):",  # "kind: 'x' is not one of ..."
)


def _located(exc: Exception, text: str, source: str, table: str) -> ConfigError:
    """One line naming the file, the line of the offending key (when the text shows it), the table and key."""
    msg = " ".join(str(exc).split())
    prefix = f"{source}: "
    body = msg[len(prefix) :] if msg.startswith(prefix) else msg
    body = body.removeprefix(f"[{table}]").removeprefix(":").strip()
    at = _AT_FIELD.search(body)
    if at:  # say msgspec's "- at `$.max_pods`" as "max_pods: ..."
        body = f"{at.group(1)}: {_AT_FIELD.sub('', body)}"
    line = None
    for pattern in _NAMED:
        m = re.search(pattern.format(table=re.escape(table)), body)
        if m:
            line = key_line(text, [table, *m.group(1).split(".")])
        if line:
            break
    line = line or key_line(text, [table])
    where = f"{source}:{line}" if line else source
    return ConfigError(f"{where}: [{table}] {body}")


def parse_run_config(doc: dict[str, Any], *, source: str, runs_root: Path | None = None, text: str = "") -> RunConfig:
    """Validate a parsed run config; ``text`` (the file's) lets errors name the line. Types are strict."""
    unknown = sorted(set(doc) - _KNOWN)
    if unknown:
        line = key_line(text, [unknown[0]])
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: unknown table(s) {unknown}; known: {sorted(_KNOWN)}")
    parts: dict[str, Any] = {}
    for name, cls in _TABLES.items():
        try:
            parts[name] = msgspec.convert(_table(doc, name, source), cls)
        except (msgspec.ValidationError, ValueError) as exc:
            raise _located(exc, text, source, name) from None
    try:
        outer = parse_config(_table(doc, "outer", source), source=source)
    except ConfigError as exc:
        raise _located(exc, text, source, "outer") from None
    try:
        fleet = FleetConfig.from_mapping(
            {"ladder": ("local",), "max_pods": 2, **_table(doc, "fleet", source)}, source=source
        )
    except ValueError as exc:
        raise _located(exc, text, source, "fleet") from None
    try:
        budget_table = dict(_table(doc, "budget", source))
        if runs_root is not None:
            budget_table.setdefault("ledger", str(runs_root / "costs.jsonl"))
        budget = BudgetConfig.from_mapping(budget_table, source=source)
    except ValueError as exc:
        raise _located(exc, text, source, "budget") from None
    baselines: dict[str, dict[str, float]] = {}
    for family, scores in _table(doc, "baselines", source).items():
        if not isinstance(scores, dict):
            line = key_line(text, ["baselines", str(family)])
            where = f"{source}:{line}" if line else source
            raise ConfigError(f"{where}: [baselines.{family}] must map model names to scores in [0, 1]")
        for model, v in scores.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
                line = key_line(text, ["baselines", str(family), str(model)])
                where = f"{source}:{line}" if line else source
                raise ConfigError(f"{where}: [baselines.{family}] {model!r} = {v!r}: a score in [0, 1] is needed")
        baselines[family] = {str(k): float(v) for k, v in scores.items()}
    cfg = RunConfig(source=source, outer=outer, fleet=fleet, budget=budget, baselines=baselines, raw=doc, **parts)
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
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = decode_toml(data, str(p))
    except TomlError as exc:
        raise ConfigError(str(exc)) from None
    return parse_run_config(doc, source=str(p), runs_root=runs_root, text=data.decode("utf-8"))
