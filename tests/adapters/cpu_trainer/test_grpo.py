"""The GRPO update of the CPU trainer (adapters.cpu_trainer._grpo) and the job -> settings mapping.

A randomly initialised miniature Qwen3 model is enough: what is tested is the direction of the update
(positively-advantaged completions become likelier, negatively-advantaged ones less likely), the clip, the
KL term and the no-signal case, not what the model knows.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.episode.job_config import PrimeRLTable

if TYPE_CHECKING:
    from transformers import Qwen3ForCausalLM

    from adapters.cpu_trainer import EpisodeSample


def tiny_model(seed: int = 0) -> Qwen3ForCausalLM:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config).train(False)


def episode(
    model: Qwen3ForCausalLM, group: int, reward: float, prompt: list[int], completion: list[int]
) -> EpisodeSample:
    import torch

    from adapters.cpu_trainer import EpisodeSample, TurnSample
    from adapters.tiny.generate import completion_logprobs

    with torch.no_grad():
        (lp,) = completion_logprobs(model, [prompt], [completion])
    return EpisodeSample(
        group=group, reward=reward, turns=[TurnSample(prompt_ids=prompt, token_ids=completion, logprobs=lp.tolist())]
    )


def logprob(model: Qwen3ForCausalLM, prompt: list[int], completion: list[int]) -> float:
    import torch

    from adapters.tiny.generate import completion_logprobs

    with torch.no_grad():
        (lp,) = completion_logprobs(model, [prompt], [completion])
    return float(lp.sum())


@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=30))
def test_advantages_sum_to_zero_per_group_and_vanish_on_ties(rows: list[tuple[int, float]]) -> None:
    from adapters.cpu_trainer import group_advantages

    groups = [g for g, _ in rows]
    rewards = [r for _, r in rows]
    adv = group_advantages(rewards, groups)
    for g in set(groups):
        members = [a for a, gg in zip(adv, groups, strict=True) if gg == g]
        assert abs(sum(members)) < 1e-9
    tied = group_advantages([1.0] * len(groups), groups)
    assert all(abs(a) < 1e-12 for a in tied)


def test_token_loss_is_minus_advantage_at_ratio_one_and_clips_outside_the_range() -> None:
    import torch

    from adapters.cpu_trainer import token_loss

    old = torch.tensor([-1.0, -1.0, -1.0])
    new = torch.tensor([-1.0, -1.0 + 0.5, -1.0 - 0.5])  # ratios 1, e^0.5 ~ 1.65, e^-0.5 ~ 0.61
    loss, outside = token_loss(new, old, 2.0, 0.2, 0.2)
    assert outside.tolist() == [False, True, True]
    assert loss[0].item() == pytest.approx(-2.0)
    assert loss[1].item() == pytest.approx(-2.0 * 1.2)  # a positive advantage gains at most 1 + clip
    assert loss[2].item() == pytest.approx(-2.0 * torch.exp(torch.tensor(-0.5)).item())  # min keeps the drop
    neg, _ = token_loss(new, old, -1.0, 0.2, 0.2)
    assert neg[2].item() == pytest.approx(0.8)  # a negative advantage stops pushing down below 1 - clip


def test_update_raises_the_rewarded_completion_and_lowers_the_unrewarded_one() -> None:
    import torch

    from adapters.cpu_trainer import grpo_update

    model = tiny_model()
    prompt, good, bad = [1, 2, 3, 4], [5, 6, 7], [8, 9, 10]
    batch = [episode(model, 0, 1.0, prompt, good), episode(model, 0, 0.0, prompt, bad)]
    before = (logprob(model, prompt, good), logprob(model, prompt, bad))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    stats = grpo_update(model, optimizer, batch, temperature=1.0, epochs=2)
    after = (logprob(model, prompt, good), logprob(model, prompt, bad))
    assert after[0] > before[0] and after[1] < before[1]
    assert stats.episodes == 2 and stats.tokens == 6
    assert stats.max_ratio_error < 1e-4  # first epoch: recomputed log-probs equal the recorded ones


def test_no_signal_means_no_step() -> None:
    import torch

    from adapters.cpu_trainer import grpo_update

    model = tiny_model()
    weights = copy.deepcopy(model.state_dict())
    batch = [episode(model, 0, 1.0, [1, 2], [3, 4]), episode(model, 0, 1.0, [1, 2], [5, 6])]
    stats = grpo_update(model, torch.optim.AdamW(model.parameters(), lr=1e-1), batch, temperature=1.0)
    assert (stats.tokens, stats.episodes) == (0, 0)
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())


def test_kl_to_the_base_is_zero_at_first_and_grows_as_the_model_moves() -> None:
    import torch

    from adapters.cpu_trainer import grpo_update

    model = tiny_model()
    reference = copy.deepcopy(model)
    prompt = [1, 2, 3]
    batch = [episode(model, 0, 1.0, prompt, [4, 5, 6]), episode(model, 0, 0.0, prompt, [7, 8, 9])]
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-2)
    first = grpo_update(model, optimizer, batch, temperature=1.0, epochs=1, kl_coef=0.1, reference=reference)
    second = grpo_update(model, optimizer, batch, temperature=1.0, epochs=1, kl_coef=0.1, reference=reference)
    assert first.kl == pytest.approx(0.0, abs=1e-6)
    assert second.kl > 1e-6


def table(**overrides: object) -> PrimeRLTable:
    base: dict[str, object] = {
        "model": "Qwen/Qwen3-0.6B",
        "learning_rate": 1e-5,
        "max_steps": 10,
        "batch_size": 32,
        "group_size": 8,
    }
    return PrimeRLTable(**(base | overrides))  # type: ignore[arg-type]


def test_job_values_are_honoured_and_the_rest_is_noted() -> None:
    from adapters.cpu_trainer import settings_from_job

    s = settings_from_job(table(temperature=0.8, max_tokens=64, max_turns=5, scheduler="cosine", warmup_steps=2))
    assert (s.max_steps, s.batch_size, s.group_size, s.tasks_per_step) == (10, 32, 8, 4)
    assert (s.temperature, s.max_tokens, s.max_turns, s.scheduler, s.warmup_steps) == (0.8, 64, 5, "cosine", 2)
    assert s.learning_rate == pytest.approx(1e-5 * 10)
    odd = settings_from_job(table(optimizer="muon", algorithm="rae", loss="ipo", lora_rank=8), lr_scale=10)
    assert odd.optimizer == "adamw" and odd.learning_rate == pytest.approx(1e-4)
    assert any("muon" in n for n in odd.notes) and any("rae" in n for n in odd.notes)
    assert any("ipo" in n for n in odd.notes) and any("lora_rank" in n for n in odd.notes)
    with pytest.raises(ValueError, match="multiple of group_size"):
        settings_from_job(table(batch_size=30))


def test_a_chained_episode_trains_as_one_sequence_with_the_same_log_probs() -> None:
    import torch

    from adapters.cpu_trainer import EpisodeSample, TurnSample
    from adapters.cpu_trainer._grpo import _episode_rows, sequence_logprobs
    from adapters.tiny.generate import completion_logprobs

    model = tiny_model()
    first = TurnSample(prompt_ids=[1, 2, 3], token_ids=[4, 5], logprobs=[0.0, 0.0])
    second = TurnSample(prompt_ids=[1, 2, 3, 4, 5, 6, 7], token_ids=[8, 9, 10], logprobs=[0.0] * 3)
    chained = EpisodeSample(group=0, reward=1.0, turns=[first, second])
    (row,) = _episode_rows(chained, 0.5)
    assert row.ids == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] and row.positions == [3, 4, 7, 8, 9]
    with torch.no_grad():
        (merged,) = sequence_logprobs(model, [row], temperature=0.7)
        per_turn = completion_logprobs(
            model, [first.prompt_ids, second.prompt_ids], [[4, 5], [8, 9, 10]], temperature=0.7
        )
    assert torch.allclose(merged, torch.cat(per_turn), atol=1e-5)
    broken = TurnSample(prompt_ids=[1, 2, 3, 4, 9, 6], token_ids=[8], logprobs=[0.0])  # re-rendered differently
    assert len(_episode_rows(EpisodeSample(group=0, reward=1.0, turns=[first, broken]), 0.5)) == 2
