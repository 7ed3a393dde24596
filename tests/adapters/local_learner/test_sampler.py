"""The local sampler server and the agent policy on it: a turn sampled through the OpenAI-compatible server
carries the tokens and log-probs the learner needs, the learner agrees with the sampler on them (ratio 1), and
a policy bound to a published sampler path samples the merged LoRA weights of that step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from handlers.training import SampledTurn, trajectory_to_datums
from tests.adapters.local_learner.conftest import BASE, RANK

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You write job.toml files."},
    {"role": "user", "content": "Add 2 and 3, then tell me the result."},
]
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        },
    }
]


async def _turns(policy: Any, n: int) -> list[SampledTurn]:
    messages = list(MESSAGES)
    turns = []
    for _ in range(n):
        reply = await policy.next_turn(messages, TOOLS)
        t = reply.training
        assert t["sampler_version"] == policy.sampler_version and t["stop_reason"] in ("stop", "length")
        assert len(t["sampled_tokens"]) == len(t["sampled_logprobs"]) == reply.output_tokens > 0
        assert len(t["prompt_tokens"]) == reply.input_tokens and reply.model == "local"
        turns.append(SampledTurn(**{k: t[k] for k in ("prompt_tokens", "sampled_tokens", "sampled_logprobs")}))
        messages += [reply.message(), {"role": "user", "content": "Go on."}]
    return turns


async def test_sampled_turns_train_at_ratio_one_on_the_base_and_on_a_published_step(
    learner: Any, run_dir: Path
) -> None:
    import httpx

    from adapters.local_learner.sampler import LocalPolicy, LocalSamplerServer, SamplerPool

    pool = SamplerPool(run_dir, base_model=BASE, rank=RANK, keep=1)
    transport = httpx.AsyncHTTPTransport()

    def policy(path: str, version: int) -> LocalPolicy:
        return LocalPolicy(
            base_url=server.base_url,
            transport=transport,
            sampler_path=path,
            sampler_version=version,
            max_tokens=12,
            temperature=1.0,
        )

    async with LocalSamplerServer(pool) as server:
        turns = await _turns(policy("", 0), 2)
        datums = trajectory_to_datums(turns, 1.0)
        first = await learner.train_step(datums, loss_fn="importance_sampling", loss_fn_config=None, learning_rate=0.05)
        # The learner's log-probs of what the base model sampled are the sampler's: ratio 1, KL 0.
        assert first.metrics["local/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
        assert abs(first.metrics["local/kl_sampler_learner"]) < 1e-4

        # Publish step 1; a policy bound to it samples the merged adapter, which the learner agrees with too.
        _state, sampler_path = await learner.save("step_000001", with_state=False)
        turns = await _turns(policy(sampler_path, 1), 1)
        step = await learner.train_step(
            trajectory_to_datums(turns, -1.0), loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-9
        )
        assert step.metrics["local/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
        # ... while the base model's log-probs of the same tokens differ (the step changed the weights).
        base_turn = await _turns(policy("", 0), 1)
        assert base_turn[0].sampled_tokens != turns[0].sampled_tokens or base_turn[0].sampled_logprobs != pytest.approx(
            turns[0].sampled_logprobs, abs=1e-4
        )
        # keep = 1: base, step 1, base again were three merges; the samples were handed out and forgotten.
        assert pool.loads == 3 and pool.samples == {}

        async with httpx.AsyncClient(base_url=server.base_url) as client:
            nope = {"model": "local:checkpoints/nope.sampler", "messages": MESSAGES}
            missing = await client.post("/chat/completions", json=nope)
            assert missing.status_code == 500 and "not found" in missing.json()["error"]["message"]
            outside = await client.post("/chat/completions", json={"model": "local:../x.sampler", "messages": MESSAGES})
            assert outside.status_code == 500 and "inside the run directory" in outside.json()["error"]["message"]
            assert (await client.get("/local/samples")).status_code == 400
    await transport.aclose()


async def test_each_turn_samples_with_its_episodes_seed_whatever_runs_beside_it(run_dir: Path) -> None:
    """A turn's sample depends on (run seed, episode id, turn) only: not on the requests before it, nor on
    others sharing the server; another episode id or run seed samples something else."""
    import asyncio

    import httpx

    from adapters.local_learner.sampler import LocalPolicy, LocalSamplerServer, SamplerPool, turn_seed

    assert turn_seed(0, "ep000001", 0) == turn_seed(0, "ep000001", 0) != turn_seed(0, "ep000001", 1)
    assert turn_seed(0, "ep000001", 0) != turn_seed(1, "ep000001", 0) and 0 <= turn_seed(5, "x", 3) < 2**62
    pool = SamplerPool(run_dir, base_model=BASE, rank=RANK, keep=1, max_batch=1)
    transport = httpx.AsyncHTTPTransport()

    def policy(episode_id: str, seed: int) -> LocalPolicy:
        return LocalPolicy(
            base_url=server.base_url,
            transport=transport,
            sampler_path="",
            sampler_version=0,
            max_tokens=12,
            temperature=1.0,
            episode_id=episode_id,
            seed=seed,
        )

    async def tokens(p: LocalPolicy) -> list[list[int]]:
        return [t.sampled_tokens for t in await _turns(p, 2)]

    async with LocalSamplerServer(pool) as server:
        alone = await tokens(policy("ep000001", 0))
        crowd = await asyncio.gather(
            *(tokens(policy(e, s)) for e, s in [("ep000002", 0), ("ep000001", 0), ("ep000001", 1)])
        )
    await transport.aclose()
    assert crowd[1] == alone  # the same episode, now after and beside other requests
    assert crowd[0] != alone and crowd[2] != alone  # another episode; another run seed
