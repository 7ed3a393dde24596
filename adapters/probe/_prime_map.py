"""The prime-rl config a job maps to, minimal, and the probe's completeness check of it.

A deliberately small mapping of ``job.toml`` onto prime-rl's ``rl`` config shape (``RLConfig``: shared
top-level ``model`` / ``max_steps`` / ``seq_len``, ``trainer``, ``orchestrator`` with one train source,
``inference``), enough for the probe to say the job is complete and consistent before any GPU time. The
full TOML generator belongs to the prime-rl adapter (``adapters/prime_rl``); replace :func:`prime_rl_config`
with it when it lands.
"""

from __future__ import annotations

from typing import Any

from handlers.episode.job_config import JobConfig

__all__ = ["config_problems", "prime_rl_config"]


def prime_rl_config(job: JobConfig) -> dict[str, Any]:
    p, env = job.prime_rl, job.env
    taskset: dict[str, Any] = {"id": env.id}
    if env.num_tasks > 0:
        taskset["num_tasks"] = env.num_tasks
    scheduler: dict[str, Any] = {"type": p.scheduler}
    if p.scheduler != "constant" and p.warmup_steps:
        scheduler["warmup_steps"] = p.warmup_steps
    trainer: dict[str, Any] = {
        "optim": {"type": p.optimizer, "lr": p.learning_rate},
        "scheduler": scheduler,
        "loss": {"type": p.loss},
    }
    cfg: dict[str, Any] = {
        "max_steps": p.max_steps,
        "seq_len": p.seq_len,
        "model": {"name": p.model},
        "ckpt": {},
        "trainer": trainer,
        "orchestrator": {
            "batch_size": p.batch_size,
            "group_size": p.group_size,
            "algo": {"type": p.algorithm},
            "train": {
                "sampling": {"temperature": p.temperature, "max_completion_tokens": p.max_tokens},
                "source": [
                    {
                        "name": env.id,
                        "env": {
                            "taskset": taskset,
                            "agent": {
                                "max_turns": p.max_turns,
                                "harness": {"id": "null"},
                                "runtime": {"type": "subprocess"},
                            },
                        },
                    }
                ],
            },
        },
        "inference": {"vllm": {"tool_call_parser": "hermes"}},
    }
    if p.lora_rank > 0:
        trainer["model"] = {"lora": {"rank": p.lora_rank, "alpha": 2 * p.lora_rank}}
        cfg["weight_broadcast"] = {"type": "filesystem"}
    return cfg


def _get(cfg: dict[str, Any], path: str) -> Any:
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


_REQUIRED = (
    "model.name",
    "max_steps",
    "seq_len",
    "trainer.optim.type",
    "trainer.optim.lr",
    "orchestrator.batch_size",
    "orchestrator.group_size",
    "orchestrator.train.sampling.max_completion_tokens",
    "orchestrator.train.source",
)


def config_problems(cfg: dict[str, Any], *, module: str | None, tasks_loaded: int | None) -> list[str]:
    """Why ``cfg`` is not a complete, consistent training config (empty when it is)."""
    problems = [f"{path} is missing" for path in _REQUIRED if _get(cfg, path) in (None, "", [])]
    if problems:
        return problems
    batch, group = cfg["orchestrator"]["batch_size"], cfg["orchestrator"]["group_size"]
    if group <= 0 or batch % group:
        problems.append(f"orchestrator.batch_size {batch} is not a multiple of group_size {group}")
    tokens = cfg["orchestrator"]["train"]["sampling"]["max_completion_tokens"]
    if tokens >= cfg["seq_len"]:
        problems.append(f"max_tokens {tokens} leaves no room for the prompt in seq_len {cfg['seq_len']}")
    warmup = _get(cfg, "trainer.scheduler.warmup_steps")
    if warmup is not None and warmup >= cfg["max_steps"]:
        problems.append(f"warmup_steps {warmup} must be below max_steps {cfg['max_steps']}")
    for source in cfg["orchestrator"]["train"]["source"]:
        env_id = _get(source, "env.taskset.id")
        if not env_id:
            problems.append(f"train source {source.get('name')!r} has no env.taskset.id")
        elif module is None:
            problems.append(f"env {env_id!r} is not importable (see env_import)")
    if tasks_loaded is not None and group > 0 and batch // group > tasks_loaded:
        prompts = batch // group
        problems.append(
            f"a step needs {prompts} distinct prompts (batch_size / group_size); the env has {tasks_loaded}"
        )
    return problems
