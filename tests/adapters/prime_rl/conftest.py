"""Shared pieces for the prime-rl runner tests: job bundles, stand-in settings, a fake HF cache, fake scorers."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from adapters.prime_rl.runner import RunnerSettings
from adapters.vllm.types import EvalPackageRef, EvalSampling, HiddenScore, ScoringFailed, ServedModel
from handlers.ports.inner_trainer import JobBundle, Progress

ROOT = Path(__file__).resolve().parents[3]
STANDINS = ROOT / "fixtures" / "prime_rl" / "standins"

JOB_TOML = """\
[prime_rl]
model = "Qwen/Qwen3-0.6B"
learning_rate = 2e-5
max_steps = {max_steps}
batch_size = 16
group_size = 8
lora_rank = {lora_rank}
seq_len = 1024

[env]
id = "{env_id}"
path = "env"
"""

ENV_INIT = "import verifiers.v1 as vf  # a stand-in env: only compiled, never imported, by the stand-in rl\n"


def make_bundle(
    root: Path,
    *,
    job_id: str = "job-1",
    max_steps: int = 4,
    lora_rank: int = 8,
    env_id: str = "calc-train",
    module: str = "calc_train",
    env_source: str = ENV_INIT,
    time_budget_s: int | None = None,
) -> JobBundle:
    bundle = root / "bundles" / job_id
    (bundle / "env" / module).mkdir(parents=True)
    (bundle / "env" / "pyproject.toml").write_text(f'[project]\nname = "{env_id}"\nversion = "0.1.0"\n')
    (bundle / "env" / module / "__init__.py").write_text(env_source)
    (bundle / "job.toml").write_text(JOB_TOML.format(max_steps=max_steps, lora_rank=lora_rank, env_id=env_id))
    spec = json.loads((ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json").read_text())
    if time_budget_s is not None:
        spec["bounds"]["time_budget_s"] = time_budget_s
    (bundle / "task_spec.json").write_text(json.dumps(spec))
    return JobBundle(job_id=job_id, family="calc_chain", root=str(bundle))


def fake_hf_home(root: Path, model: str = "Qwen/Qwen3-0.6B") -> Path:
    repo = root / "hf" / "hub" / ("models--" + model.replace("/", "--"))
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (snap / "tokenizer.json").write_text("{}")
    (snap / "model.safetensors").write_bytes(b"base-weights")
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("abc123")
    return root / "hf"


def standin_settings(root: Path, *, mode: str = "ok", gpus: int = 2, **overrides: object) -> RunnerSettings:
    py = sys.executable
    env = {
        "STANDIN_SITE": str(root / "site"),
        "STANDIN_RL_MODE": mode,
        "STANDIN_RL_STEP_S": "0.02",
        "PYTHONPATH": str(ROOT),
    }
    env.update(overrides.pop("env", {}))  # type: ignore[arg-type]
    base = RunnerSettings(
        work_root=str(root / "work"),
        gpus=gpus,
        install_command=(py, str(STANDINS / "uv.py"), "pip", "install", "--no-deps", "-e", "{env_dir}"),
        rl_command=(py, str(STANDINS / "rl.py")),
        inference_command=(py, str(STANDINS / "inference.py")),
        inference_port=free_port(),
        env=env,
        poll_s=0.05,
        kill_grace_s=1.0,
        dry_run_timeout_s=60,
        install_timeout_s=60,
        inference_health_timeout_s=30,
        hf_home=str(fake_hf_home(root)),
    )
    return msgspec.structs.replace(base, **overrides)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_in(directory: Path) -> list[int]:
    """Pids of live (non-zombie) processes whose working directory is inside ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] != "Z" and (cwd == directory or directory in cwd.parents):
            found.append(int(entry.name))
    return found


class SkillScorer:
    """A HiddenScorer fake: the score is the served model's stand-in skill (0 for the base)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[ServedModel, EvalPackageRef, EvalSampling]] = []
        self.fail_on = fail_on

    async def score(
        self, model: ServedModel, package: EvalPackageRef, sampling: EvalSampling, workdir: Path
    ) -> HiddenScore:
        self.calls.append((model, package, sampling))
        if self.fail_on == model.name:
            raise ScoringFailed(f"{model.name}: 200/200 eval episodes errored", "vllm log tail")
        source = model.lora_path or model.weights_dir
        skill = 0.0
        if source and (Path(source) / "standin_skill.json").exists():
            skill = json.loads((Path(source) / "standin_skill.json").read_text())["solve_fraction"]
        return HiddenScore(
            score=skill,
            n=package.tasks,
            errored=0,
            sampling=sampling.describe(package.tasks),
            seconds=0.01,
            model=model.name,
            fingerprint=package.fingerprint,
        )


class Recorder:
    def __init__(self) -> None:
        self.events: list[Progress] = []

    async def __call__(self, p: Progress) -> None:
        self.events.append(p)


@pytest.fixture(scope="session")
def eval_pkg_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from families.eval_env import build_eval_package

    root = tmp_path_factory.mktemp("evalpkgs")
    build_eval_package("calc_chain", root)
    return root


def eval_source_for(root: Path, check: Callable[[JobBundle], None] | None = None):
    async def source(job: JobBundle) -> Path:
        if check is not None:
            check(job)
        return root / ("ait-eval-" + job.family.replace("_", "-"))

    return source
