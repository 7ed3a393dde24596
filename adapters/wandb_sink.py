"""Optional Weights & Biases sink: mirrors a run's step metrics (reward and its parts, rates, model share, spend,
optimizer-step metrics) to W&B, where prime-rl and tinker-cookbook users already look.

Off unless configured: a ``[wandb]`` table with a ``project`` in the run config (:func:`config_from_run`), or
``ait report RUN --wandb PROJECT`` for a finished run. ``wandb`` is not a dependency of ai-trains-ai: it is
imported only when a sink is built, and :class:`WandbUnavailable` says how to get it. What is logged is decided by
:class:`handlers.run.metrics.MetricsMirror` (pure, tested without wandb); this module only carries the rows.

Live: ``runtime.start_reactor(wandb_reactor(sink))``. The W&B run id is the ai-trains-ai run id, with
``resume="allow"``, so a resumed run continues the same W&B run. Offline (``mode="offline"`` or
``WANDB_MODE=offline``) writes under ``dir`` for a later ``wandb sync``. API keys come from wandb's own login or
``WANDB_API_KEY``; they never enter the log or our config.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from engine.log import read_log
from events import Recorded, RunStarted
from handlers.run.metrics import MetricsMirror

if TYPE_CHECKING:
    from engine.runtime import Runtime

__all__ = ["WandbConfig", "WandbSink", "WandbUnavailable", "config_from_run", "mirror_run", "wandb_reactor"]

log = structlog.get_logger(__name__)

MODES: Final = ("", "online", "offline", "disabled")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


class WandbUnavailable(RuntimeError):
    """wandb is not installed (or failed to import)."""


class WandbConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The ``[wandb]`` table of the run config."""

    project: str
    entity: str = ""
    mode: str = ""  # "" lets wandb decide (WANDB_MODE, then online)
    dir: str = ""  # where wandb writes its files ("" = wandb's default)
    tags: list[str] = []

    def __post_init__(self) -> None:
        if not self.project:
            raise ValueError("wandb.project: must be a non-empty string")
        if self.mode not in MODES:
            raise ValueError(f"wandb.mode: expected one of {MODES[1:]}, got {self.mode!r}")

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, source: str = "run config") -> WandbConfig:
        known = set(cls.__struct_fields__)
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError(f"{source}: [wandb] has unknown key(s) {unknown}; known: {sorted(known)}")
        try:
            return msgspec.convert(dict(table), cls)
        except (msgspec.ValidationError, ValueError) as exc:
            raise ValueError(f"{source}: [wandb]: {exc}") from None


def config_from_run(config: Mapping[str, Any], *, source: str = "run config") -> WandbConfig | None:
    """The sink's config if the run config has a ``[wandb]`` table with a project; else None (the sink is off)."""
    table = config.get("wandb")
    if not isinstance(table, Mapping) or not table.get("project"):
        return None
    return WandbConfig.from_mapping(table, source=source)


def _import_wandb() -> ModuleType:
    try:
        import wandb  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise WandbUnavailable(f"the W&B sink needs wandb ({exc}); install it with `uv pip install wandb`") from None
    module: ModuleType = wandb
    return module


class WandbSink:
    """One W&B run. ``module`` replaces the wandb module (tests pass a fake with ``init`` -> run)."""

    def __init__(
        self, config: WandbConfig, run_id: str, run_config: Mapping[str, Any] | None = None, module: Any = None
    ) -> None:
        self.config = config
        self.run_id = run_id
        wandb = module if module is not None else _import_wandb()
        kwargs: dict[str, Any] = {
            "project": config.project,
            "name": run_id,
            "id": _ID_UNSAFE.sub("-", run_id),
            "resume": "allow",
            "config": dict(run_config or {}),
            "tags": list(config.tags),
        }
        if config.entity:
            kwargs["entity"] = config.entity
        if config.mode:
            kwargs["mode"] = config.mode
        if config.dir:
            Path(config.dir).mkdir(parents=True, exist_ok=True)
            kwargs["dir"] = config.dir
        self.run = wandb.init(**kwargs)
        self.mirror = MetricsMirror()
        self.logged = 0
        log.info("wandb.started", project=config.project, run_id=run_id, mode=config.mode or "(wandb default)")

    def observe(self, rec: Recorded) -> int:
        """Mirror one record; returns how many rows it logged."""
        rows = self.mirror.observe(rec)
        for step, metrics in rows:
            self.run.log(metrics, step=step)
        self.logged += len(rows)
        return len(rows)

    def close(self) -> None:
        self.run.finish()
        log.info("wandb.finished", run_id=self.run_id, rows=self.logged)


def wandb_reactor(sink: WandbSink) -> Callable[[Runtime, MemoryObjectReceiveStream[Recorded]], Awaitable[None]]:
    """A runtime reactor that mirrors every durable record (wandb's calls run in a worker thread)."""

    async def react(rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        last = -1
        try:
            async for rec in stream:
                await anyio.to_thread.run_sync(sink.observe, rec)
                last = rec.seq
        finally:
            # The runtime cancels its reactors on exit, once every record is durable; a record handed to a
            # reactor cancelled in that instant is dropped by the memory stream. So mirror whatever the log holds
            # past the last record seen, then close the W&B run, shielded so the cancellation cannot skip it.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_catch_up, sink, rt.directory / "events.jsonl", last)
                await anyio.to_thread.run_sync(sink.close)

    return react


def _catch_up(sink: WandbSink, events: Path, last_seq: int) -> None:
    for rec in read_log(events).records[last_seq + 1 :]:
        sink.observe(rec)


def mirror_run(events: Path | str, config: WandbConfig, *, module: Any = None) -> WandbSink:
    """Mirror a whole (finished or partial) run's log into one W&B run; returns the closed sink."""
    records = read_log(events).records
    head = records[0].event if records else None
    run_id = head.run_id if isinstance(head, RunStarted) else Path(events).parent.name
    run_config = head.config if isinstance(head, RunStarted) else {}
    sink = WandbSink(config, run_id, run_config, module=module)
    try:
        for rec in records:
            sink.observe(rec)
    finally:
        sink.close()
    return sink
