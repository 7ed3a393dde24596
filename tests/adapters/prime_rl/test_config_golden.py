"""Golden configs: every case in fixtures/prime_rl/golden/cases.toml generates exactly its reviewed TOML.

Regenerate after a reviewed change with
``AIT_REGEN_GOLDEN=1 .venv/bin/pytest tests/adapters/prime_rl/test_config_golden.py``.
With ``AIT_PRIME_RL_SRC=<a prime-rl checkout at the pinned commit>`` the goldens are also validated by
prime-rl's own ``RLConfig`` / ``InferenceConfig`` (pydantic, extra=forbid) in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from adapters.prime_rl.config import build_rl_config
from families.spec import load_spec
from handlers.episode.job_config import EnvTable, JobConfig, PrimeRLTable

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "fixtures" / "prime_rl" / "golden"
CASES: list[dict[str, Any]] = tomllib.loads((GOLDEN / "cases.toml").read_text())["case"]
REGEN = os.environ.get("AIT_REGEN_GOLDEN") == "1"


def generate(case: dict[str, Any]):
    job = msgspec.convert({"prime_rl": case["prime_rl"], "env": case["env"]}, JobConfig)
    spec = load_spec(ROOT / "examples" / "tasks" / f"{case['spec']}.json")
    return build_rl_config(job, spec, gpus=case["gpus"])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_generated_config_equals_reviewed_golden(case: dict[str, Any]) -> None:
    gen = generate(case)
    outputs = {f"{case['name']}.rl.toml": gen.rl_toml}
    if gen.inference_toml is not None:
        outputs[f"{case['name']}.inference.toml"] = gen.inference_toml
    for name, text in outputs.items():
        path = GOLDEN / name
        if REGEN:
            path.write_text(text)
        assert path.exists(), f"{path} missing: run with AIT_REGEN_GOLDEN=1 and review it"
        assert text == path.read_text(), f"{name} differs from the reviewed golden (AIT_REGEN_GOLDEN=1 to update)"
    # No stale golden of this case (e.g. an inference file for a case that became 2-GPU).
    on_disk = {p.name for p in GOLDEN.glob(f"{case['name']}.*.toml")}
    assert on_disk == set(outputs)


def test_cases_cover_every_exposed_key_with_a_non_default_value() -> None:
    for struct, section in ((PrimeRLTable, "prime_rl"), (EnvTable, "env")):
        for field in msgspec.structs.fields(struct):
            values = [c[section][field.name] for c in CASES if field.name in c[section]]
            if field.required:
                assert len(values) == len(CASES), f"[{section}].{field.name} missing from a case"
            else:
                assert any(v != field.default for v in values), f"no case sets [{section}].{field.name} != default"
    assert {c["gpus"] for c in CASES} == {1, 2}


def test_goldens_reflect_their_inputs() -> None:
    """Each golden's values trace back to its case (a cross-check that does not re-run the generator)."""
    for case in CASES:
        rl = tomllib.loads((GOLDEN / f"{case['name']}.rl.toml").read_text())
        t = case["prime_rl"]
        assert rl["model"]["name"] == t["model"]
        assert rl["max_steps"] == t["max_steps"]
        assert rl["trainer"]["optim"] == {"type": t.get("optimizer", "adamw"), "lr": t["learning_rate"]}
        assert rl["orchestrator"]["batch_size"] == t["batch_size"]
        assert rl["orchestrator"]["group_size"] == t["group_size"]
        (source,) = rl["orchestrator"]["train"]["source"]
        assert source["env"]["taskset"]["id"] == case["env"]["id"]
        assert source["env"]["agent"]["harness"] == {"id": "null"}
        assert source["env"]["agent"]["runtime"] == {"type": "subprocess"}
        assert ("lora" in rl["trainer"].get("model", {})) == bool(t.get("lora_rank", 0))
        assert ("inference" in rl) == (case["gpus"] == 2)
        assert rl["weight_broadcast"] == {"type": "filesystem"}
        assert rl["monitors"]["file"]["path"] == "metrics.jsonl"


PRIME_RL_SRC = os.environ.get("AIT_PRIME_RL_SRC")

STUB_ENV = """
import verifiers.v1 as vf

class StubTask(vf.Task[vf.TaskData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def zero(self, trace: vf.Trace) -> float:
        return 0.0

class StubConfig(vf.TasksetConfig):
    num_tasks: int = 5

class StubTaskset(vf.Taskset[StubTask, StubConfig]):
    def load(self):
        return [StubTask(vf.TaskData(prompt=f"q{i}"), self.config.task) for i in range(self.config.num_tasks)]

__all__ = ["StubTaskset"]
"""


@pytest.mark.slow
@pytest.mark.skipif(not PRIME_RL_SRC, reason="set AIT_PRIME_RL_SRC to a prime-rl checkout to validate the goldens")
def test_goldens_validate_against_prime_rl_configs(tmp_path: Path) -> None:
    pytest.importorskip("verifiers.v1")
    for case in CASES:
        module = case["env"]["id"].replace("-", "_").lower()
        (tmp_path / module).mkdir(exist_ok=True)
        (tmp_path / module / "__init__.py").write_text(STUB_ENV)
    # Validate every golden, then derive each run's GPU split from the *validated* config the way prime-rl's
    # launcher does at the pinned commit (src/prime_rl/entrypoints/rl.py: inference takes the first
    # num_infer_gpus local GPUs when [inference] is set, the trainer the next num_train_gpus).
    script = textwrap.dedent(
        f"""
        import json, sys, tomllib, warnings
        from pathlib import Path
        from prime_rl.configs.rl import RLConfig
        from prime_rl.configs.inference import InferenceConfig
        warnings.simplefilter("ignore")
        for p in sorted(Path({str(GOLDEN)!r}).glob("*.rl.toml")):
            c = RLConfig.model_validate(tomllib.loads(p.read_text()))
            d = c.deployment
            n_infer = d.num_infer_gpus if c.inference is not None else 0
            split = {{
                "gpus_per_node": d.gpus_per_node,
                "inference": list(range(n_infer)),
                "trainer": list(range(n_infer, n_infer + d.num_train_gpus)),
                "model": c.model.name,
            }}
            print("SPLIT", p.name.removesuffix(".rl.toml"), json.dumps(split))
        for p in sorted(Path({str(GOLDEN)!r}).glob("*.inference.toml")):
            InferenceConfig.model_validate(tomllib.loads(p.read_text()))
        print("validated")
        """
    )
    src = Path(PRIME_RL_SRC or "") / "packages" / "prime-rl-configs" / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(tmp_path)])}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "validated" in proc.stdout, proc.stderr[-3000:]
    splits = {
        line.split(" ", 2)[1]: json.loads(line.split(" ", 2)[2])
        for line in proc.stdout.splitlines()
        if line.startswith("SPLIT ")
    }
    assert set(splits) == {c["name"] for c in CASES}
    for case in CASES:
        split = splits[case["name"]]
        assert split["model"] == case["prime_rl"]["model"]
        if case["gpus"] == 2:  # separate devices: vLLM on GPU 0, the trainer on GPU 1 of the pod
            assert split == split | {"gpus_per_node": 2, "inference": [0], "trainer": [1]}, (case["name"], split)
        else:  # rl starts no vLLM; the runner's own inference server shares GPU 0 with the trainer
            assert split == split | {"gpus_per_node": 1, "inference": [], "trainer": [0]}, (case["name"], split)
