"""The minimal job -> prime-rl config mapping and its completeness check."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from adapters.probe import config_problems, prime_rl_config
from handlers.episode.job_config import parse_job_config

GOOD_JOB = (Path(__file__).parent / "workspaces" / "good_calc" / "job.toml").read_text()


def test_good_job_maps_to_a_complete_config() -> None:
    job = parse_job_config(GOOD_JOB)
    cfg = prime_rl_config(job)
    assert cfg["model"]["name"] == job.prime_rl.model
    (source,) = cfg["orchestrator"]["train"]["source"]
    assert source["env"]["taskset"]["id"] == job.env.id
    assert cfg["orchestrator"]["batch_size"] % cfg["orchestrator"]["group_size"] == 0
    assert config_problems(cfg, module="calc_chain_train", tasks_loaded=64) == []


def test_problems_name_what_is_inconsistent() -> None:
    cfg = prime_rl_config(parse_job_config(GOOD_JOB))
    assert config_problems(cfg, module=None, tasks_loaded=64) == [
        "env 'calc-chain-train' is not importable (see env_import)"
    ]
    assert "4 distinct prompts" in config_problems(cfg, module="m", tasks_loaded=3)[0]
    cfg["model"]["name"] = ""
    cfg["orchestrator"]["train"]["source"] = []
    assert config_problems(cfg, module="m", tasks_loaded=64) == [
        "model.name is missing",
        "orchestrator.train.source is missing",
    ]


def test_lora_and_scheduler_options_are_mapped() -> None:
    text = GOOD_JOB.replace('scheduler = "constant"', 'scheduler = "cosine"\nwarmup_steps = 2\nlora_rank = 8')
    cfg = prime_rl_config(parse_job_config(text))
    assert cfg["trainer"]["scheduler"] == {"type": "cosine", "warmup_steps": 2}
    assert cfg["trainer"]["model"]["lora"]["rank"] == 8 and cfg["weight_broadcast"] == {"type": "filesystem"}


@given(st.integers(1, 64), st.integers(1, 16), st.integers(1, 2000), st.integers(1, 2048))
def test_batch_multiple_and_token_room_are_enforced(batch: int, group: int, tokens: int, seq: int) -> None:
    text = (
        GOOD_JOB.replace("batch_size = 16", f"batch_size = {batch}")
        .replace("group_size = 4", f"group_size = {group}")
        .replace("max_tokens = 256", f"max_tokens = {tokens}")
        .replace("seq_len = 1024", f"seq_len = {seq}")
    )
    problems = config_problems(prime_rl_config(parse_job_config(text)), module="m", tasks_loaded=10_000)
    assert any("not a multiple" in p for p in problems) == (batch % group != 0)
    assert any("no room for the prompt" in p for p in problems) == (tokens >= seq)
