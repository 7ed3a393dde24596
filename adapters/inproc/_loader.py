"""Loading a verifiers v1 env package's Taskset the way verifiers does, for in-process rollouts.

``load_env("calc-train", path="workspace/env", config={"num_tasks": 64})`` makes the package importable
(``path`` is the package directory itself, or a project directory holding ``<module>/`` or
``src/<module>/``), validates the config with the Taskset's own config type (``extra=forbid``: an unknown
key is an error naming it) and builds the Taskset with ``vf.load_taskset``, exactly as ``vf-eval`` and
prime-rl do. Any failure is an :class:`EnvLoadError` naming the env and what went wrong.

The in-process path has no runtime (no sandbox, no files): a task whose reward or metric needs one is
refused up front (:meth:`InprocEnv.check_task`), rather than scored differently from ``vf-eval``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog
import verifiers.v1 as vf  # type: ignore[import-untyped]
from pydantic import ValidationError

__all__ = ["EnvLoadError", "InprocEnv", "load_env", "module_name"]

log = structlog.get_logger(__name__)


class EnvLoadError(ValueError):
    """An env package that cannot be loaded or run in process; the message names the env and the cause."""


def module_name(env_id: str) -> str:
    """The module verifiers imports for ``env_id`` (``owner/calc-env@1.0`` -> ``calc_env``)."""
    return env_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


def _import_root(path: Path, module: str) -> Path:
    """The directory to put on ``sys.path`` so that ``import <module>`` finds the package at ``path``."""
    if (path / "__init__.py").is_file() and path.name == module:
        return path.parent
    for root in (path, path / "src"):
        if (root / module / "__init__.py").is_file() or (root / f"{module}.py").is_file():
            return root
    raise EnvLoadError(
        f"env package directory {path}: no module {module!r} in it (looked for {module}/__init__.py, "
        f"src/{module}/__init__.py and {module}.py, or {path.name}/__init__.py named {module})"
    )


def _ensure_importable(path: Path, module: str) -> None:
    root = str(_import_root(path.resolve(), module))
    if root not in sys.path:
        sys.path.insert(0, root)
    importlib.invalidate_caches()
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if origin is not None and not Path(origin).resolve().is_relative_to(Path(root)):
        # Another copy of the same package was imported before (an earlier job in this process): forget it,
        # so ``import`` finds the one asked for rather than silently reusing the old code.
        log.warning("inproc.env_reimported", module=module, old=origin, new=root)
        for name in [n for n in sys.modules if n == module or n.startswith(f"{module}.")]:
            del sys.modules[name]


def _requires_runtime(fn: Callable[..., Any]) -> bool:
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


class InprocEnv:
    """A loaded Taskset and what the in-process rollout loop needs from it."""

    def __init__(self, env_id: str, taskset: Any) -> None:
        self.env_id = env_id
        self.taskset = taskset
        self.config = taskset.config

    def tasks(self, limit: int | None = None) -> list[Any]:
        """The first ``limit`` tasks (all of them for a finite taskset), with verifiers' ``idx`` set."""
        view = self.taskset if limit is None else self.taskset.take(limit)
        if not view.bounded:
            raise EnvLoadError(f"env {self.env_id!r}: the taskset is infinite; give a task limit")
        try:
            return list(view)
        except Exception as exc:
            raise EnvLoadError(f"env {self.env_id!r}: loading tasks failed: {type(exc).__name__}: {exc}") from exc

    def shared_toolsets(self) -> list[Any]:
        """The taskset-scoped toolsets (one instance serves every rollout)."""
        return list(type(self.taskset).toolsets(self.config))

    @staticmethod
    def task_toolsets(task: Any) -> list[Any]:
        """The task-scoped toolsets (a fresh instance per rollout)."""
        return list(type(task).toolsets(task.config))

    def check_task(self, task: Any) -> None:
        """Refuse a task the in-process path would score differently from ``vf-eval`` (no runtime here)."""
        needs = [fn.__name__ for kind in ("reward", "metric") for fn in task.hooks(kind) if _requires_runtime(fn)]
        needs += [j.reward_name for j in task.plugged_judges() if _requires_runtime(j.score)]
        if needs:
            raise EnvLoadError(
                f"env {self.env_id!r}: {', '.join(needs)} need a runtime (sandbox files), which in-process "
                "rollouts do not have; score from the trace instead"
            )


def load_env(
    env_id: str,
    *,
    path: str | Path | None = None,
    config: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> InprocEnv:
    """Import the env package ``env_id`` (from ``path`` if given) and build its Taskset from ``config``.

    ``defaults`` are applied only to fields the taskset's config type declares and ``config`` leaves unset
    (the trainer passes the job's ``family`` this way to an env that takes one).
    """
    module = module_name(env_id)
    if path is not None:
        _ensure_importable(Path(path), module)
    try:
        config_type = vf.taskset_config_type(env_id)
    except Exception as exc:  # importing runs the package's own code: any failure is the env's
        raise EnvLoadError(f"env {env_id!r}: {type(exc).__name__}: {exc}") from exc
    try:
        declared = {k: v for k, v in (defaults or {}).items() if k in config_type.model_fields}
        cfg = config_type.model_validate({"id": env_id, **declared, **(config or {})})
    except ValidationError as exc:
        raise EnvLoadError(f"env {env_id!r}: bad taskset config: {exc}") from exc
    try:
        taskset = vf.load_taskset(cfg)
    except Exception as exc:  # the package's own code runs here: any failure is the env's
        raise EnvLoadError(f"env {env_id!r}: building the taskset failed: {type(exc).__name__}: {exc}") from exc
    log.info("inproc.env_loaded", env=env_id, taskset=type(taskset).__name__)
    return InprocEnv(env_id, taskset)
