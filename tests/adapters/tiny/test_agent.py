"""The tiny trainer agent (fixtures/tiny/tiny-agent): it plays the replica's harness, and its choices are uniform.

Episodes are sampled at temperature 1 through the local learner's sampler pool (the policy the outer loop
serves), on the replica's calc_chain and ledger tasks, with the real workspace tools. One session fixture
plays them all (N_EPISODES at once, batched); every test reads it. The choice probabilities are also read
exactly, by teacher forcing, so the uniformity check does not depend on sampling noise.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from adapters.tiny.specs import FIXTURE_DIR

if TYPE_CHECKING:
    from adapters.tiny.agent_play import Played
    from families.spec import TaskSpec

AGENT = FIXTURE_DIR / "tiny-agent"
N_EPISODES = 32  # 16 calc_chain + 16 ledger: 4 expected per choice (exact probabilities are checked below too)
FORMAT_FLOOR = 0.90  # parseable job.toml + submit_job
CHI2_CRIT_P001_DF7 = 24.32  # chi-square critical value, 7 degrees of freedom, p = 0.001


@pytest.fixture(scope="session")
def train_specs() -> list[TaskSpec]:
    from adapters.tiny.agent import replica_specs

    specs = [s for s in replica_specs() if s.family in ("calc_chain", "ledger")]
    assert {s.family for s in specs} == {"calc_chain", "ledger"}
    return specs


@pytest.fixture(scope="session")
def played(train_specs: list[TaskSpec]) -> list[Played]:
    from adapters.local_learner.sampler import SamplerPool
    from adapters.tiny.agent_play import play_many

    async def run() -> list[Played]:
        with tempfile.TemporaryDirectory() as tmp:
            pool = SamplerPool(Path(tmp), base_model=str(AGENT), rank=8, seed=0)
            try:
                return await play_many(pool, train_specs, N_EPISODES, seed=0)
            finally:
                await pool.aclose()

    return asyncio.run(run())


@pytest.mark.slow  # one fixture samples 32 episodes (~12k tokens, ~30 CPU-s on one thread) for the two tests
def test_agent_submits_a_parseable_job_in_most_episodes(played: list[Played]) -> None:
    assert len(played) == N_EPISODES
    ok = [p for p in played if p.submitted and p.parseable]
    errors = [p.error for p in played if p.error]
    assert len(ok) / len(played) >= FORMAT_FLOOR, errors
    # What it submits is one of the replica's choices (a parseable job with another model or env would not be).
    assert sum(p.choice is not None for p in played) / len(played) >= FORMAT_FLOOR, errors


@pytest.mark.slow
def test_agent_choices_are_near_uniform_when_sampled(played: list[Played]) -> None:
    from handlers.episode.choice import all_choices

    chosen = [p.choice for p in played if p.choice is not None]
    n = len(chosen)
    counts = {c: sum(x == c for x in chosen) for c in all_choices()}
    expected = n / len(counts)
    chi2 = sum((k - expected) ** 2 / expected for k in counts.values())
    assert chi2 < CHI2_CRIT_P001_DF7, {c.label: k for c, k in counts.items()}
    # Each model about half the time (binomial sd at n=32 is 0.09; the bound is ~2.3 sd).
    small = sum(c.model.endswith("0.6B") for c in chosen) / n
    assert abs(small - 0.5) <= 0.2, small


def test_agent_choice_probabilities_are_near_uniform(train_specs: list[TaskSpec]) -> None:
    """Exact: the probability of each model, learning rate and rubric, teacher-forced at the point of choosing."""
    import torch

    from adapters.tiny.agent import transcript
    from adapters.tiny.chat import render_prompt
    from adapters.tiny.model import load_checkpoint
    from handlers.episode.choice import LEARNING_RATES, MODELS, RUBRICS, Choice
    from handlers.episode.tools import TOOL_SCHEMAS

    ckpt = load_checkpoint(AGENT)
    tok = ckpt.tokenizer

    def prob(prefix_ids: list[int], continuation: str) -> float:
        ids = tok(continuation, add_special_tokens=False)["input_ids"]
        full = torch.tensor([prefix_ids + ids])
        with torch.no_grad():
            logp = torch.log_softmax(ckpt.model(full).logits[0], dim=-1)
        return math.exp(sum(float(logp[len(prefix_ids) + i - 1, t]) for i, t in enumerate(ids)))

    for spec in train_specs:
        messages = transcript(spec, Choice(MODELS[0], RUBRICS[0], "1e-05"))
        prompt = render_prompt(tok, messages[:4], TOOL_SCHEMAS)  # up to the INSTRUCTIONS.md result
        content = json.loads(messages[4]["tool_calls"][0]["function"]["arguments"])
        call_head = '<tool_call>\n{"name": "write_file", "arguments": {"path": "job.toml", "content": "'
        before_model = json.dumps(content["content"]).strip('"').split("Qwen/Qwen3-")[0] + "Qwen/Qwen3-"
        prefix = prompt + tok(call_head + before_model, add_special_tokens=False)["input_ids"]
        p_models = [prob(prefix, m.split("Qwen3-")[1]) for m in MODELS]
        assert sum(p_models) > 0.95, p_models  # it writes one of the two models
        assert all(abs(p / sum(p_models) - 0.5) < 0.1 for p in p_models), p_models
        text = json.dumps(content["content"]).strip('"')
        before_lr = text.split("learning_rate = ")[0] + "learning_rate = "
        prefix = prompt + tok(call_head + before_lr, add_special_tokens=False)["input_ids"]
        p_lrs = [prob(prefix, lr) for lr in LEARNING_RATES]
        assert sum(p_lrs) > 0.95, p_lrs  # it writes one of the two learning rates
        assert all(abs(p / sum(p_lrs) - 0.5) < 0.1 for p in p_lrs), p_lrs
        before_env = text.split("envs/")[0] + "envs/"
        prefix = prompt + tok(call_head + before_env, add_special_tokens=False)["input_ids"]
        p_rubrics = [prob(prefix, r) for r in RUBRICS]
        assert sum(p_rubrics) > 0.95, p_rubrics
        assert all(abs(p / sum(p_rubrics) - 0.25) < 0.08 for p in p_rubrics), p_rubrics


def test_agent_was_built_for_todays_replica_workspace() -> None:
    """The transcripts it learnt are the ones the replica renders now (else: rebuild it, see its README)."""
    from adapters.tiny.agent import replica_specs, transcripts_fingerprint

    meta = json.loads((AGENT / "meta.json").read_text())
    assert meta["transcripts_fingerprint"] == transcripts_fingerprint(replica_specs()), (
        "the replica's template, tasks or tools changed: python -m adapters.tiny.agent --seed 0 --out fixtures/tiny"
    )


def test_transcript_is_the_real_episode(train_specs: list[TaskSpec]) -> None:
    from adapters.tiny.agent import transcript
    from handlers.episode.choice import Choice, choice_of
    from handlers.episode.job_config import parse_job_config

    spec = train_specs[0]
    messages = transcript(spec, Choice("Qwen/Qwen3-1.7B", "wrong", "3e-05"))
    calls = [m["tool_calls"][0]["function"] for m in messages if m.get("tool_calls")]
    assert [c["name"] for c in calls] == ["read_file", "write_file", "submit_job"]
    assert "job.toml" in messages[3]["content"]  # INSTRUCTIONS.md as read_file returns it
    assert messages[5]["content"].startswith("wrote job.toml (")
    job = parse_job_config(json.loads(calls[1]["arguments"])["content"])
    assert choice_of(job) == Choice("Qwen/Qwen3-1.7B", "wrong", "3e-05")
