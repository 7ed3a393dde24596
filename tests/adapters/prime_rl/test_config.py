"""adapters.prime_rl.config: refusals before any GPU time, and invariants of every accepted config."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.prime_rl.config import ConfigRefused, RunLayout, build_rl_config, env_module_name
from families.spec import TaskSpec, load_spec
from handlers.episode.job_config import EnvTable, JobConfig, PrimeRLTable, parse_job_config

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_spec(ROOT / "examples" / "tasks" / "calc_chain_v1.json")
FAST = load_spec(ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json")


def job(**overrides: object) -> JobConfig:
    table = {"model": "Qwen/Qwen3-0.6B", "learning_rate": 3e-6, "max_steps": 20, "batch_size": 64, "group_size": 8}
    env = {"id": str(overrides.pop("env_id", "calc-train"))}
    table.update(overrides)
    return JobConfig(prime_rl=PrimeRLTable(**table), env=EnvTable(**env))  # type: ignore[arg-type]


def refused(j: JobConfig, spec: TaskSpec = SPEC, gpus: int = 2) -> list[str]:
    with pytest.raises(ConfigRefused) as info:
        build_rl_config(j, spec, gpus=gpus)
    assert str(info.value) == "\n".join(info.value.problems)
    return info.value.problems


def test_batch_not_divisible_by_group_is_refused() -> None:
    (problem,) = refused(job(batch_size=60, group_size=8))
    assert "[prime_rl].batch_size = 60" in problem and "multiple of group_size (8)" in problem


def test_unknown_optimizer_is_refused_even_when_built_in_code() -> None:
    # job.toml parsing already rejects it (Literal type); a table constructed directly is caught here.
    with pytest.raises(ValueError, match="optimizer"):
        parse_job_config(
            '[prime_rl]\nmodel="Qwen/Qwen3-0.6B"\nlearning_rate=1e-6\nmax_steps=2\nbatch_size=8\ngroup_size=2\n'
            'optimizer="lion"\n[env]\nid="x"\n'
        )
    problems = refused(job(optimizer="lion", scheduler="step", loss="dpo", algorithm="ppo"))
    assert [p.split(" = ")[0] for p in problems] == [
        "job.toml: [prime_rl].optimizer",
        "job.toml: [prime_rl].scheduler",
        "job.toml: [prime_rl].loss",
        "job.toml: [prime_rl].algorithm",
    ]
    assert "'adamw'" in problems[0]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"learning_rate": 1e-2}, "learning_rate"),
        ({"max_steps": 101}, "max_steps"),
        ({"max_steps": 0}, "max_steps"),
        ({"batch_size": 512, "group_size": 16}, "batch_size"),
        ({"group_size": 32, "batch_size": 64}, "group_size"),
        ({"seq_len": 4096}, "seq_len"),
        ({"max_tokens": 3000}, "max_tokens"),
        ({"temperature": 0.0}, "temperature"),
        ({"model": "Qwen/Qwen3-8B"}, "model"),
        ({"lora_rank": 1024}, "lora_rank"),
        ({"max_turns": 0}, "max_turns"),
        ({"scheduler": "cosine", "warmup_steps": 20}, "warmup_steps"),
    ],
)
def test_out_of_bounds_values_are_refused_naming_the_key(overrides: dict[str, object], key: str) -> None:
    problems = refused(job(**overrides))
    assert any(f"[prime_rl].{key} = " in p for p in problems), problems


def test_warmup_needs_a_scheduler_with_warmup() -> None:
    (problem,) = refused(job(warmup_steps=3))
    assert "constant scheduler has no warmup" in problem
    assert build_rl_config(job(warmup_steps=3, scheduler="linear"), SPEC).rl["trainer"]["scheduler"] == {
        "type": "linear",
        "warmup_steps": 3,
        "decay_steps": 17,
    }


def test_bad_env_id_and_gpu_count_are_refused() -> None:
    problems = refused(job(env_id="9 bad"), gpus=3)
    assert any("[env].id = '9 bad'" in p for p in problems)
    assert any("[env].id = 'calc-train\\n'" in p for p in refused(job(env_id="calc-train\n")))
    assert any("gpus = 3" in p for p in problems)


def test_every_problem_is_reported_at_once() -> None:
    problems = refused(job(learning_rate=1.0, batch_size=7, optimizer="lion"), FAST)
    keys = {p.split(" = ")[0].split(".")[-1] for p in problems}
    assert {"learning_rate", "batch_size", "optimizer"} <= keys


def test_env_module_name_follows_the_verifiers_loader() -> None:
    assert env_module_name("calc-train") == "calc_train"
    assert env_module_name("owner/Calc-Train@0.1") == "calc_train"


def test_layout_is_used_for_paths() -> None:
    gen = build_rl_config(job(), SPEC, layout=RunLayout(output_dir="out", run_name="job7"))
    assert gen.rl["output_dir"] == "out" and gen.rl["run"] == {"name": "job7"}
    assert gen.rl["ckpt"] == {"keep_last": 1} and gen.layout.ckpt_dir == "out/job7/checkpoints"


@st.composite
def valid_tables(draw: st.DrawFn, spec: TaskSpec = SPEC) -> PrimeRLTable:
    b = spec.bounds
    group = draw(st.integers(b.group_size.min, b.group_size.max))
    multiples = [m for m in range(group, b.batch_size.max + 1, group) if m >= b.batch_size.min]
    max_steps = draw(st.integers(1, b.max_steps))
    seq_len = draw(st.integers(64, b.seq_len))
    scheduler = draw(st.sampled_from(["constant", "linear", "cosine"]))
    warmup = 0 if scheduler == "constant" else draw(st.integers(0, max_steps - 1))
    return PrimeRLTable(
        model=draw(st.sampled_from(b.base_models)),
        learning_rate=draw(st.floats(b.learning_rate.min, b.learning_rate.max)),
        max_steps=max_steps,
        batch_size=draw(st.sampled_from(multiples)),
        group_size=group,
        temperature=draw(st.floats(0.05, 2.0)),
        max_tokens=draw(st.integers(1, seq_len)),
        optimizer=draw(st.sampled_from(["adamw", "sgd", "muon"])),
        algorithm=draw(st.sampled_from(["grpo", "max_rl", "rae"])),
        scheduler=scheduler,
        warmup_steps=warmup,
        loss=draw(st.sampled_from(["default", "ipo"])),
        lora_rank=draw(st.sampled_from([0, 1, 8, 64, 256])),
        seq_len=seq_len,
        max_turns=draw(st.integers(1, 32)),
    )


@settings(max_examples=60, deadline=None)
@given(table=valid_tables(), gpus=st.sampled_from([1, 2]))
def test_every_in_bounds_job_gives_a_consistent_config(table: PrimeRLTable, gpus: int) -> None:
    gen = build_rl_config(JobConfig(prime_rl=table, env=EnvTable(id="calc-train")), SPEC, gpus=gpus)
    rl = tomllib.loads(gen.rl_toml)
    assert rl == gen.rl  # the TOML text is exactly the config the runner reasons about
    orch = rl["orchestrator"]
    assert orch["batch_size"] % orch["group_size"] == 0
    assert orch["train"]["sampling"]["max_completion_tokens"] <= rl["seq_len"]
    assert rl["trainer"]["optim"]["lr"] == table.learning_rate
    sched = rl["trainer"]["scheduler"]
    if sched["type"] == "linear":
        assert sched["warmup_steps"] + sched["decay_steps"] <= rl["max_steps"]
    if sched["type"] == "cosine":
        assert sched["warmup_steps"] < rl["max_steps"]
    lora = rl["trainer"].get("model", {}).get("lora")
    assert (lora is not None) == (table.lora_rank > 0)
    if gpus == 1:
        assert "inference" not in rl and gen.inference is not None
        assert tomllib.loads(gen.inference_toml or "") == gen.inference
        assert rl["deployment"]["num_infer_gpus"] == 0
    else:
        assert rl["inference"]["vllm"]["tool_call_parser"] == "hermes" and gen.inference is None


@settings(max_examples=40, deadline=None)
@given(table=valid_tables(), bump=st.integers(1, 7))
def test_a_batch_off_the_group_multiple_is_always_refused(table: PrimeRLTable, bump: int) -> None:
    if table.group_size == 1 or bump % table.group_size == 0:
        return
    bad = msgspec.structs.replace(table, batch_size=table.batch_size + bump)
    with pytest.raises(ConfigRefused, match="multiple of group_size"):
        build_rl_config(JobConfig(prime_rl=bad, env=EnvTable(id="calc-train")), SPEC)
