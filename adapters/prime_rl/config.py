"""A validated job (``[prime_rl]`` + ``[env]`` + task spec) -> a complete prime-rl ``rl`` TOML config.

The target is prime-rl at :data:`.pins.PRIME_RL_COMMIT` (``RLConfig``, pydantic with ``extra=forbid``).
Everything the agent may choose comes from :class:`handlers.episode.job_config.PrimeRLTable`; everything else is
fixed here, for reasons that matter on a pod:

- ``weight_broadcast = filesystem`` always: the final policy is then written as HF safetensors (full
  fine-tune) or a PEFT adapter (LoRA) under ``<run dir>/broadcasts/step_<max_steps>/`` with a ``STABLE``
  marker, which is what the scoring phase serves with vLLM (prime-rl's own checkpoints are torch DCP).
- a final DCP checkpoint goes to a known directory (``<run dir>/checkpoints/step_<N>/``, last one kept);
- the file monitor is on (``<run dir>/metrics.jsonl``), which the runner follows for progress;
- the train source is the agent's env id with the ``null`` harness and the ``subprocess`` runtime
  (the defaults are ``bash`` and remote Prime sandboxes);
- 2 GPUs: prime-rl's own layout (GPU 0 vLLM, GPU 1 trainer). 1 GPU: ``rl`` without ``[inference]``
  (trainer on GPU 0) plus a separate ``inference`` config the runner starts first on the same GPU with
  a reduced memory share (prime-rl's launcher alone needs 2 GPUs); the orchestrator's weight updates go
  to that server's engine port directly, as the launcher arranges for its own server. The 1-GPU layout
  validates against prime-rl's config classes but has not been run on a GPU yet.

Invalid combinations are refused here, before any GPU time, with every problem named
(:class:`ConfigRefused`): the task's bounds (``check_bounds``), an unknown optimizer / scheduler /
loss / algorithm, warmup with the constant scheduler, a bad env id or GPU count.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from families.spec import TaskSpec
from handlers.episode.job_config import (
    ALGORITHMS,
    LOSSES,
    OPTIMIZERS,
    SCHEDULERS,
    JobConfig,
    PrimeRLTable,
    check_bounds,
)

from . import pins
from .toml_writer import dumps

__all__ = [
    "COLOCATED_INFER_MEMORY",
    "ConfigRefused",
    "GeneratedConfig",
    "RunLayout",
    "build_rl_config",
    "env_module_name",
]

# GPU memory share of vLLM when it shares the single GPU with the trainer (the trainer takes the rest).
COLOCATED_INFER_MEMORY: Final = 0.3
DEFAULT_INFERENCE_PORT: Final = 8000
_BACKEND_OFFSET: Final = 100  # prime-rl's default engine port 8100 behind the router on 8000
_ENV_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


class ConfigRefused(ValueError):
    """The job cannot become a valid prime-rl run; ``problems`` lists every reason, each naming its key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class RunLayout(msgspec.Struct, frozen=True, kw_only=True):
    """Where the run writes, relative to the directory ``rl`` is started in (the runner's job dir)."""

    output_dir: str = "outputs"
    run_name: str = "rl"

    @property
    def run_dir(self) -> str:
        return f"{self.output_dir}/{self.run_name}"

    @property
    def ckpt_dir(self) -> str:
        """prime-rl's default: ``<run dir>/checkpoints/step_<N>/{trainer,orchestrator}/``."""
        return f"{self.run_dir}/checkpoints"


class GeneratedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The configs to run and the facts the runner needs about them."""

    rl: dict[str, Any]
    rl_toml: str
    inference: dict[str, Any] | None  # a separate `inference @` config (1-GPU layout), else None
    inference_toml: str | None
    layout: RunLayout
    model: str
    env_id: str
    source_name: str
    max_steps: int
    lora_rank: int
    gpus: int


def env_module_name(env_id: str) -> str:
    """The importable module of an env id, as the verifiers loader derives it (``calc-train`` -> ``calc_train``)."""
    return env_id.split("/")[-1].split("@")[0].replace("-", "_").lower()


def _problems(job: JobConfig, spec: TaskSpec, gpus: int) -> list[str]:
    t = job.prime_rl
    errs = list(check_bounds(t, spec.bounds))

    def bad(key: str, value: object, why: str) -> None:
        errs.append(f"job.toml: [prime_rl].{key} = {value!r}: {why}")

    # The table's Literal types are enforced when job.toml is parsed, but a table built in code is not.
    for key, value, allowed in (
        ("optimizer", t.optimizer, OPTIMIZERS),
        ("scheduler", t.scheduler, SCHEDULERS),
        ("loss", t.loss, LOSSES),
        ("algorithm", t.algorithm, ALGORITHMS),
    ):
        if value not in allowed:
            bad(key, value, f"unknown; one of {list(allowed)}")
    if t.scheduler == "constant" and t.warmup_steps:
        bad("warmup_steps", t.warmup_steps, "the constant scheduler has no warmup; use scheduler 'linear' or 'cosine'")
    if not _ENV_ID.fullmatch(job.env.id):
        errs.append(
            f"job.toml: [env].id = {job.env.id!r}: must start with a letter and hold only letters, digits, - or _"
        )
    if job.env.num_tasks < 0:
        errs.append(f"job.toml: [env].num_tasks = {job.env.num_tasks!r}: must be >= 0 (0: the taskset's default)")
    if gpus not in (1, 2):
        errs.append(f"runner: gpus = {gpus}: a job runs on 1 or 2 GPUs")
    return errs


def _scheduler(t: PrimeRLTable) -> dict[str, Any]:
    if t.scheduler == "linear":
        # Warm up, then decay linearly over the rest of the run (prime-rl checks warmup + decay <= max_steps).
        return {"type": "linear", "warmup_steps": t.warmup_steps, "decay_steps": t.max_steps - t.warmup_steps}
    if t.scheduler == "cosine":
        return {"type": "cosine", "warmup_steps": t.warmup_steps}
    return {"type": "constant"}


def _source(job: JobConfig) -> dict[str, Any]:
    taskset: dict[str, Any] = {"id": job.env.id}
    if job.env.num_tasks:
        taskset["num_tasks"] = job.env.num_tasks
    return {
        "name": job.env.id,
        "env": {
            "taskset": taskset,
            "agent": {
                "max_turns": job.prime_rl.max_turns,
                "harness": {"id": "null"},
                "runtime": {"type": "subprocess"},
            },
        },
    }


def _vllm(t: PrimeRLTable) -> dict[str, Any]:
    # Qwen3 emits hermes-style <tool_call> blocks; pin the parser rather than rely on "auto".
    return {"max_model_len": t.seq_len, "tool_call_parser": "hermes"}


def _rl(job: JobConfig, gpus: int, layout: RunLayout, inference_port: int) -> dict[str, Any]:
    t = job.prime_rl
    trainer: dict[str, Any] = {}
    if t.lora_rank:
        # alpha = 2 * rank keeps prime-rl's default scaling (rank 16, alpha 32).
        trainer["model"] = {"lora": {"rank": t.lora_rank, "alpha": float(2 * t.lora_rank)}}
    trainer["optim"] = {"type": t.optimizer, "lr": t.learning_rate}
    trainer["scheduler"] = _scheduler(t)
    trainer["loss"] = {"type": t.loss}
    rl: dict[str, Any] = {
        "max_steps": t.max_steps,
        "seq_len": t.seq_len,
        "output_dir": layout.output_dir,
        "run": {"name": layout.run_name},
        "model": {"name": t.model},
        "log": {"level": "info"},
        "ckpt": {"keep_last": 1},  # the final checkpoint only, under <run dir>/checkpoints/
        "monitors": {"file": {"path": "metrics.jsonl"}},
        "weight_broadcast": {"type": "filesystem"},
        "deployment": {
            "type": "single_node",
            "gpus_per_node": gpus,
            "num_train_gpus": 1,
            "num_infer_gpus": 1 if gpus == 2 else 0,
        },
        "trainer": trainer,
        "orchestrator": {
            "batch_size": t.batch_size,
            "group_size": t.group_size,
            "algo": {"type": t.algorithm},
            "train": {
                "sampling": {"temperature": t.temperature, "max_completion_tokens": t.max_tokens},
                "source": [_source(job)],
            },
        },
    }
    if gpus == 2:
        rl["inference"] = {"vllm": _vllm(t)}
    else:
        # The separately started server: a router on the port, the engine behind it. As prime-rl's launcher
        # does for its own server, weight updates (admin ops) go to the engine directly, not via the router.
        client: dict[str, Any] = {}
        if inference_port != DEFAULT_INFERENCE_PORT:
            client["base_url"] = f"http://localhost:{inference_port}/v1"
        client["admin_base_url"] = [f"http://localhost:{inference_port + _BACKEND_OFFSET}/v1"]
        rl["orchestrator"]["model"] = {"client": client}
    return rl


def _colocated_inference(t: PrimeRLTable, port: int) -> dict[str, Any]:
    vllm: dict[str, Any] = {"model": t.model, **_vllm(t), "gpu_memory_utilization": COLOCATED_INFER_MEMORY}
    if t.lora_rank:
        vllm |= {"enable_lora": True, "max_lora_rank": t.lora_rank}
    return {
        "server": {"port": port},
        "backend_port": port + _BACKEND_OFFSET,
        "vllm": vllm,
        "weight_broadcast": {"type": "filesystem"},
    }


def build_rl_config(
    job: JobConfig,
    spec: TaskSpec,
    *,
    gpus: int = 2,
    layout: RunLayout | None = None,
    inference_port: int = DEFAULT_INFERENCE_PORT,
) -> GeneratedConfig:
    """The prime-rl config for ``job`` under ``spec``'s bounds, or :class:`ConfigRefused` listing every problem.

    ``inference_port`` places the 1-GPU layout's separate inference server (prime-rl's default is 8000).
    """
    problems = _problems(job, spec, gpus)
    if problems:
        raise ConfigRefused(problems)
    layout = layout or RunLayout()
    t = job.prime_rl
    header = [
        f"prime-rl `rl` config generated by ait (adapters/prime_rl/config.py) for task {spec.name}; do not edit.",
        f"Pinned: {pins.pins_summary()}",
        f"Agent env: {job.env.id} (module {env_module_name(job.env.id)}); "
        + ("LoRA rank " + str(t.lora_rank) if t.lora_rank else "full fine-tune")
        + f"; {gpus} GPU(s).",
    ]
    rl = _rl(job, gpus, layout, inference_port)
    inference = None if gpus == 2 else _colocated_inference(t, inference_port)
    inference_toml = None
    if inference is not None:
        inference_header = [
            "prime-rl `inference` config for the 1-GPU layout: started by the runner before `rl`, on the same GPU.",
            f"Pinned: {pins.pins_summary()}",
        ]
        inference_toml = dumps(inference, header_comment=inference_header)
    return GeneratedConfig(
        rl=rl,
        rl_toml=dumps(rl, header_comment=header),
        inference=inference,
        inference_toml=inference_toml,
        layout=layout,
        model=t.model,
        env_id=job.env.id,
        source_name=job.env.id,
        max_steps=t.max_steps,
        lora_rank=t.lora_rank,
        gpus=gpus,
    )
