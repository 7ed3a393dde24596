"""The model card of a trained trainer agent (``ait publish``): what the run did, from its log alone.

Hugging Face reads the YAML front matter (library, base model, tags); the body gives the reward per outer step
with its decomposition, the holdout table, what the run cost and how to reproduce it (seed, code version,
config).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.log import read_log
from events import RunStarted
from views.report.data import ReportData, collect

__all__ = ["model_card"]


def _header(run_dir: Path) -> RunStarted | None:
    for rec in read_log(run_dir / "events.jsonl").records[:1]:
        if isinstance(rec.event, RunStarted):
            return rec.event
    return None


def _steps(data: ReportData) -> list[str]:
    if not data.steps:
        return ["No outer step was applied in this run."]
    lines = [
        "| step | episodes | mean reward | validation | quality | speed | jobs succeeded |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in data.steps:
        lines.append(
            f"| {s.step} | {s.episodes} | {s.reward:+.4f} | {s.validation:.4f} | {s.quality:.4f} | {s.speed:.4f} "
            f"| {s.jobs_succeeded}/{s.jobs} |"
        )
    return lines


def _holdout(data: ReportData) -> list[str]:
    if not data.holdout:
        return ["No holdout arm was run (`ait holdout --checkpoint PATH` adds one)."]
    lines = [
        "| sampler | families | episodes | mean reward | validated | jobs succeeded |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for h in data.holdout:
        lines.append(
            f"| v{h.sampler_version} | {', '.join(h.families)} | {h.episodes} | {h.reward:+.4f} | {h.validated} "
            f"| {h.jobs_succeeded}/{h.jobs} |"
        )
    return lines


def model_card(run_dir: Path | str, *, repo_id: str, checkpoint: str) -> str:
    """The README.md of the published repository for the run at ``run_dir``."""
    root = Path(run_dir)
    data = collect(root)
    header = _header(root)
    config: dict[str, Any] = dict(header.config.get("config", {})) if header is not None else {}
    base_model = str(config.get("outer", {}).get("base_model", "")) if isinstance(config.get("outer"), dict) else ""
    w = data.weights
    front = ["---", "library_name: peft", "tags: [ai-trains-ai, lora, grpo, reinforcement-learning]"]
    if base_model:
        front.insert(2, f"base_model: {base_model}")
    body = [
        *front,
        "---",
        "",
        f"# {repo_id}",
        "",
        f"A trainer agent (a LoRA on {base_model or 'its base model'}) trained by ai-trains-ai's outer RL loop on how"
        " much the RL jobs it wrote improved small models on hidden evals. Run `" + data.run_id + "`, checkpoint"
        f" `{checkpoint}`.",
        "",
        "## Reward per outer step",
        "",
        f"reward = {w[0]:.2f} x validation + {w[1]:.2f} x quality + {w[2]:.2f} x speed (the parts below are weighted).",
        "",
        *_steps(data),
        "",
        "## Holdout",
        "",
        *_holdout(data),
        "",
        "## Cost",
        "",
        f"${data.spend_usd:.2f} in all: "
        + (", ".join(f"{k} ${v:.2f}" for k, v in sorted(data.spend_by_kind.items())) or "nothing was charged")
        + ".",
        "",
        "## Reproduce",
        "",
        f"- seed {data.seed}, code version `{header.code_version if header else 'unknown'}`",
        f"- {data.events} events in the run's log; `ait replay {data.run_id} --verify` recomputes every reward",
        "",
        "```json",
        json.dumps(config, indent=1, sort_keys=True, default=str),
        "```",
        "",
    ]
    return "\n".join(body)
