"""The run config of ``ait train`` (``examples/configs/<name>.toml``), validated on load; every error is one line
naming the file, the line (where the text shows the key) and the key. Types are strict: ``max_pods = "12"`` is
a string where a number belongs, never coerced; a byte that is not UTF-8 is an error naming its line.

Tables:

- ``[run]``: ``name`` (run id prefix), ``seed``.
- ``[outer]``: the outer loop (:class:`handlers.training.OuterConfig`): model, rank, lr, loss, group size,
  tasks per batch, staleness, concurrency, families, steps.
- ``[backend]``: ``kind = "tinker"`` (real Tinker; needs ``TINKER_API_KEY``), ``"local"`` (adapters/local_learner:
  LoRA with peft + torch on this machine, ``device = "auto" | "cpu" | "cuda"``, ``sampler_batch``: requests per
  forward pass of its sampler, 1 for bit-identical runs; ``learn = false``, the no-learning control: the same
  run with every update left out; the losses it implements only) or
  ``"offline"`` (adapters/tinker/offline.py: no network, LEARNS NOTHING; for smoke runs and tests); ``base_url``
  (tinker).
- ``[agent]``: ``kind = "tinker"`` (the policy samples from the backend's sampler; needs the tinker backend),
  ``"local"`` (samples the local backend's published weights through the local OpenAI-compatible server; needs
  the local backend) or ``"scripted"`` (replays ``<trajectories>/<family>_good.json``; with the offline backend it
  carries toy token ids so the learner has datums).
- ``[episode]``: ``task_spec`` (a path pattern with ``{family}``), ``max_turns``, ``max_attempts``,
  ``validator = "probe"`` (the sandboxed probe, seconds per submission) or ``"job_config"`` (job.toml
  against the task's bounds only, runs no agent code: fast, for smoke runs and the crash test), ``template``
  (the workspace template directory, default the project's ``template/``; the CPU replica's is
  ``examples/replica/template``: files under its ``_family/<family>/`` go to that family's workspaces only),
  ``rubric_check = "enforce"`` (default: the probe rejects an env whose reward cannot tell a right answer from a
  wrong one) or ``"report"`` (the check runs and reports but never fails a submission: the CPU replica, whose
  reward-everything and reward-wrong envs are valid choices judged by the hidden eval alone).
- ``[inner]``: ``trainer`` (a pod trainer name: ``prime_rl``, the default and the real GPU trainer; ``cpu``;
  ``standin``), ``trainer_options``, ``allow_standin``. The stand-in trainer's scores are a hash of the job
  bundle: it needs ``allow_standin = true`` and is refused with a paid learner (``[backend] kind = "tinker"``)
  or a paid provider (``runpod``), as is the ``sim`` provider (its pods run the stand-in). ``provider`` here is
  the old spelling of ``[fleet] provider``.
- ``[fleet]``: ``provider = "local" | "runpod" | "sim"`` (where ``ait train`` runs inner jobs itself, in the
  same process and log; ``runpod`` needs ``RUNPOD_API_KEY``), ``image`` (Runpod: default a CUDA base image that
  the pod start command installs onto; ``docker/Dockerfile`` builds one that needs nothing), ``ait_source`` (a pip
  requirement installing this project on such a pod), and the rest of
  :class:`handlers.fleet.policy.FleetConfig` (default: the provider's ladder, 2 pods).
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

import re
from pathlib import Path
from typing import Any

import msgspec

from adapters.wandb_sink import WandbConfig
from engine.tomlfile import TomlError, decode_toml, key_line
from handlers.budget.rules import BudgetConfig
from handlers.fleet.policy import FleetConfig
from handlers.reward.formula import RewardConfig
from handlers.training import ConfigError, OuterConfig, parse_config

__all__ = ["AgentTable", "BackendTable", "EpisodeTable", "InnerTable", "RunConfig", "RunTable", "load_run_config"]

REPO = Path(__file__).resolve().parents[1]


class RunTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str = "train"
    seed: int = 0


#: The losses the local learner implements (adapters/local_learner/losses.py says why not the others).
LOCAL_LOSSES = ("importance_sampling", "ppo", "cispo")


class BackendTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: str = "tinker"
    base_url: str = ""
    device: str = "auto"  # the local learner's: auto (the GPU when torch sees one), cpu, cuda, cuda:N
    # The local sampler's requests per forward pass; 1 makes the sampled log-probs (and so the learner's steps)
    # bit-identical from run to run: a batch pads its rows, which moves log-probs by ~1e-6.
    sampler_batch: int = 64
    # false: the no-learning control of the local learner (each step's loss and gradient computed, no update).
    learn: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("tinker", "local", "offline"):
            raise ValueError(f"kind: {self.kind!r} is not one of tinker, local, offline")
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise ValueError(f"device: {self.device!r} is not one of auto, cpu, cuda, cuda:N")
        if self.sampler_batch < 1:
            raise ValueError(f"sampler_batch: {self.sampler_batch} must be >= 1")


class AgentTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: str = "tinker"
    trajectories: str = "fixtures/trajectories"

    def __post_init__(self) -> None:
        if self.kind not in ("tinker", "local", "scripted"):
            raise ValueError(f"kind: {self.kind!r} is not one of tinker, local, scripted")


class EpisodeTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    task_spec: str = "examples/tasks/{family}_v1.json"
    max_turns: int = 40
    max_attempts: int = 3
    validator: str = "probe"
    template: str = ""  # the workspace template directory ("": the project's template/)
    rubric_check: str = "enforce"  # "report": the probe's rubric check never fails a submission (the replica)

    def __post_init__(self) -> None:
        if "{family}" not in self.task_spec:
            raise ValueError(f"task_spec: {self.task_spec!r} must contain {{family}}")
        if self.validator not in ("probe", "job_config"):
            raise ValueError(f"validator: {self.validator!r} is not one of probe, job_config")
        if self.rubric_check not in ("enforce", "report"):
            raise ValueError(f"rubric_check: {self.rubric_check!r} is not one of enforce, report")
        if self.max_turns < 1 or self.max_attempts < 1:
            raise ValueError("max_turns/max_attempts: must be >= 1")


class InnerTable(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    provider: str = ""  # the old place of [fleet] provider (runs recorded before it moved still resume)
    trainer: str = "prime_rl"
    trainer_options: dict[str, str] = {}
    allow_standin: bool = False  # the explicit opt-in to made-up inner scores (smoke runs and tests)


#: Providers ``ait train`` drives itself; the ones that bill by the hour.
PROVIDERS = ("local", "runpod", "sim")
PAID_PROVIDERS = ("runpod",)
#: The pod trainer whose scores are made up (a hash of the bundle); the sim provider's pods run it too.
STANDIN = "standin"


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
    provider: str = "local"  # [fleet] provider: where inner jobs' pods run
    image: str = ""  # [fleet] image: the container image of Runpod pods ("": a CUDA base image)
    ait_source: str = ""  # [fleet] ait_source: pip requirement installing this project on a pod

    @property
    def standin(self) -> bool:
        """Whether the inner scores are made up: the stand-in trainer, or the sim provider's stand-in pods."""
        return self.inner.trainer == STANDIN or self.provider == "sim"

    @property
    def inner_trainer(self) -> str:
        """The trainer inner jobs really run (the sim provider's in-process pods run the stand-in)."""
        return STANDIN if self.provider == "sim" else self.inner.trainer

    # the file as parsed: recorded in run.started

    def spec_path(self, family: str) -> Path:
        p = Path(self.episode.task_spec.format(family=family))
        return p if p.is_absolute() else REPO / p

    @property
    def template_dir(self) -> Path | None:
        """``[episode] template`` resolved against the project root; None: the built-in ``template/``."""
        if not self.episode.template:
            return None
        p = Path(self.episode.template)
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
    fleet_table = dict(_table(doc, "fleet", source))
    try:
        provider, image, ait_source = _provider(fleet_table, parts["inner"], source)
    except ConfigError as exc:
        raise _located(exc, text, source, "fleet") from None
    try:
        fleet = FleetConfig.from_mapping(
            {"ladder": _default_ladder(provider), "max_pods": 2, **fleet_table}, source=source
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
    try:
        reward = RewardConfig.from_mapping(_table(doc, "reward", source), source=source)
    except ValueError as exc:
        raise _located(exc, text, source, "reward") from None
    try:
        wandb = WandbConfig.from_mapping(_table(doc, "wandb", source), source=source) if "wandb" in doc else None
    except ValueError as exc:
        raise _located(exc, text, source, "wandb") from None
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
    cfg = RunConfig(
        source=source,
        outer=outer,
        fleet=fleet,
        budget=budget,
        baselines=baselines,
        raw=doc,
        reward=reward,
        wandb=wandb,
        provider=provider,
        image=image,
        ait_source=ait_source,
        **parts,
    )
    _no_standin_by_accident(cfg, source)
    if cfg.agent.kind == "tinker" and cfg.backend.kind != "tinker":
        raise ConfigError(f"{source}: [agent] kind = 'tinker' needs [backend] kind = 'tinker'")
    if cfg.backend.kind == "tinker" and cfg.agent.kind != "tinker":
        raise ConfigError(
            f"{source}: [backend] kind = 'tinker' trains the agent it samples: set [agent] kind = 'tinker'"
        )
    _local_pairing(cfg, source, text)
    template = cfg.template_dir
    if template is not None and not template.is_dir():
        line = key_line(text, ["episode", "template"])
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: [episode] template: no directory {template}")
    for family in outer.families:
        if not cfg.spec_path(family).is_file():
            raise ConfigError(f"{source}: [episode] task_spec: no file {cfg.spec_path(family)} for family {family}")
        if cfg.agent.kind == "scripted" and not cfg.trajectory_path(family).is_file():
            raise ConfigError(f"{source}: [agent] trajectories: no {cfg.trajectory_path(family)} for family {family}")
    return cfg


def _local_pairing(cfg: RunConfig, source: str, text: str) -> None:
    """The local backend trains the agent it samples, with the losses it implements."""
    if (cfg.agent.kind == "local") != (cfg.backend.kind == "local"):
        raise ConfigError(
            f"{source}: [agent] kind = 'local' and [backend] kind = 'local' go together (one trains the other)"
        )
    if not cfg.backend.learn and cfg.backend.kind != "local":
        line = key_line(text, ["backend", "learn"])
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: [backend] learn = false is the local learner's control: needs kind = 'local'")
    if cfg.backend.kind == "local" and cfg.outer.loss_fn not in LOCAL_LOSSES:
        line = key_line(text, ["outer", "loss_fn"])
        where = f"{source}:{line}" if line else source
        raise ConfigError(
            f"{where}: [outer] loss_fn: {cfg.outer.loss_fn!r} is not implemented by [backend] kind = 'local' "
            f"(one of {', '.join(LOCAL_LOSSES)})"
        )


def _provider(fleet_table: dict[str, Any], inner: InnerTable, source: str) -> tuple[str, str, str]:
    """``[fleet] provider``, ``image`` and ``ait_source`` (taken out of the table: the rest is the fleet policy's)."""
    provider = fleet_table.pop("provider", None)
    image = fleet_table.pop("image", "")
    ait_source = fleet_table.pop("ait_source", "")
    if provider is None:
        provider = inner.provider or "local"
    elif inner.provider and inner.provider != provider:
        raise ConfigError(
            f"{source}: [inner] provider = {inner.provider!r} and [fleet] provider = {provider!r} disagree: "
            f"keep [fleet] provider only"
        )
    if provider not in PROVIDERS:
        raise ConfigError(f"{source}: [fleet] provider: {provider!r} is not one of {', '.join(PROVIDERS)}")
    for name, value in (("image", image), ("ait_source", ait_source)):
        if not isinstance(value, str):
            raise ConfigError(f"{source}: [fleet] {name}: expected a string, got {value!r}")
    return provider, image, ait_source


def _default_ladder(provider: str) -> tuple[str, ...]:
    from cli.worker_wiring import default_ladder

    return default_ladder(provider)  # type: ignore[arg-type]  # checked against PROVIDERS above


def _no_standin_by_accident(cfg: RunConfig, source: str) -> None:
    """The stand-in's scores are a hash of the job bundle: running it by mistake learns from noise, and paying
    for it (Tinker steps, Runpod GPUs) spends real money on that. One line says which pairing is refused."""
    if not cfg.standin:
        return
    what = (
        "[fleet] provider = 'sim' (its pods run the stand-in)"
        if cfg.provider == "sim"
        else ("[inner] trainer = 'standin'")
    )
    if cfg.backend.kind == "tinker":
        raise ConfigError(
            f"{source}: {what} makes up its scores, and [backend] kind = 'tinker' would pay to learn from them: "
            f"use a real [inner] trainer (prime_rl, cpu) or [backend] kind = 'offline'"
        )
    if cfg.provider in PAID_PROVIDERS:
        raise ConfigError(
            f"{source}: {what} makes up its scores, and [fleet] provider = {cfg.provider!r} would pay for GPUs to "
            f"run it: use a real [inner] trainer (prime_rl, cpu)"
        )
    if not cfg.inner.allow_standin:
        raise ConfigError(
            f"{source}: {what} makes up its scores (a hash of the job bundle, nothing is trained): set [inner] "
            f"allow_standin = true to run it on purpose, or name a real trainer (prime_rl, cpu)"
        )


def required_keys(cfg: RunConfig) -> dict[str, str]:
    """The environment variables the run needs, each with the setting that needs it (checked before a run opens)."""
    keys: dict[str, str] = {}
    if cfg.backend.kind == "tinker":
        keys["TINKER_API_KEY"] = "[backend] kind = 'tinker'"
    if cfg.provider == "runpod":
        keys["RUNPOD_API_KEY"] = "[fleet] provider = 'runpod'"
    return keys


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
