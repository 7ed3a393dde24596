"""Building an episode's starting point: the workspace files from ``template/`` and the opening messages.

The workspace gets the template (instructions rendered with the task's bounds and tools, the job.toml
skeleton, the env package skeleton) plus the task's dev examples. Never a hidden eval item: those are not
in a task spec, and nothing here reads them.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import msgspec

from families.spec import TaskSpec
from handlers.reward.formula import RewardConfig
from handlers.reward.text import agent_reward_text

__all__ = ["FAMILY_DIR", "TEMPLATE_DIR", "env_id_for", "opening_messages", "template_files"]

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "template"
#: A template's per-family folder: ``_family/<family>/<path>`` becomes ``<path>`` in that family's workspaces only.
FAMILY_DIR = "_family"
MIN_TASKS = 32


def env_id_for(spec: TaskSpec) -> str:
    return f"{spec.family.replace('_', '-')}-train"


def _tools_markdown(spec: TaskSpec) -> str:
    lines = []
    for tool in spec.tools:
        fn = tool.function
        params = fn.parameters.get("properties", {})
        args = ", ".join(f"{name}: {p.get('type', 'any')}" for name, p in params.items())
        lines.append(f"- `{fn.name}({args})`: {fn.description}")
    lines.append("")
    lines.append("The JSON schemas are in `task_spec.json` (`tools`).")
    return "\n".join(lines)


def _values(spec: TaskSpec, max_attempts: int, reward: RewardConfig) -> dict[str, Any]:
    b = spec.bounds
    env_id = env_id_for(spec)
    return {
        "description": spec.description,
        "system_prompt": spec.system_prompt.replace("\n", " "),
        "module": env_id.replace("-", "_"),
        "env_id": env_id,
        "min_tasks": MIN_TASKS,
        "base_models": ", ".join(f"`{m}`" for m in b.base_models),
        "lr_min": f"{b.learning_rate.min:g}",
        "lr_max": f"{b.learning_rate.max:g}",
        "max_steps": b.max_steps,
        "batch_min": b.batch_size.min,
        "batch_max": b.batch_size.max,
        "group_min": b.group_size.min,
        "group_max": b.group_size.max,
        "seq_len": b.seq_len,
        "time_budget_s": b.time_budget_s,
        "tools": _tools_markdown(spec),
        "max_attempts": max_attempts,
        "reward_text": agent_reward_text(reward),
        "default_model": b.base_models[0],
        "default_lr": f"{b.learning_rate.min:g}",
        "default_steps": max(1, b.max_steps // 2),
        "default_batch": b.batch_size.min,
        "default_group": b.group_size.min,
    }


def template_files(
    spec: TaskSpec, *, max_attempts: int = 3, reward: RewardConfig | None = None, template_dir: Path | None = None
) -> dict[str, bytes]:
    """The initial workspace: every template file rendered for ``spec``, plus dev examples and the spec.

    ``template_dir`` (default ``template/``; the replica's is ``examples/replica/template/``): files under its
    ``_family/<family>/`` folder go only into that family's workspaces (a family's env code), at the path below
    it. Files are read through symlinks (the replica's four env packages share all but their rubric that way).
    """
    root = template_dir or TEMPLATE_DIR
    values = _values(spec, max_attempts, reward or RewardConfig())
    module = values["module"]
    files: dict[str, bytes] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        parts = path.relative_to(root).parts
        if parts[0] == FAMILY_DIR:  # a family's own files: only for that family, at the path below its folder
            if len(parts) < 3 or parts[1] != spec.family:
                continue
            parts = parts[2:]
        rel = "/".join(parts).replace("__module__", module)
        text = path.read_text(encoding="utf-8")
        files[rel] = string.Template(text).safe_substitute(values).encode("utf-8")
    examples = [msgspec.to_builtins(e) for e in spec.dev_examples]
    files["dev_examples.json"] = (json.dumps(examples, indent=2) + "\n").encode("utf-8")
    public = msgspec.to_builtins(spec)
    files["task_spec.json"] = (json.dumps(public, indent=2) + "\n").encode("utf-8")
    return files


def opening_messages(spec: TaskSpec, files: dict[str, bytes]) -> list[dict[str, Any]]:
    system = (
        "You are a machine-learning engineer who writes reinforcement-learning training jobs for small "
        "language models. You act only through your tools. Read INSTRUCTIONS.md first."
    )
    user = (
        f"Task: {spec.name}.\n\n{spec.description}\n\n"
        f"Your workspace holds: {', '.join(sorted(files))}. Write the environment package and job.toml, "
        "then call submit_job."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
