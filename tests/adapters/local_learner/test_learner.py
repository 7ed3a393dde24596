"""The local learner on the tiny-0.6b fixture: two steps change the LoRA weights with a finite loss, a state
checkpoint restores the weights and the Adam state exactly, and a resumed learner takes the same next step."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from handlers.ports.learner import DatumSpec
from tests.adapters.local_learner.conftest import BASE, make_learner

CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}


def _datum(seed: int, advantage: float, n_prompt: int = 12, n_sampled: int = 10) -> DatumSpec:
    """A prompt then sampled tokens (ids from the tiny vocabulary), the sampler's logprobs a plausible -3."""
    seq = [(seed * 37 + 11 * i) % 900 + 20 for i in range(n_prompt + n_sampled + 1)]
    lq = [0.0] * n_prompt + [-3.0] * n_sampled
    adv = [0.0] * n_prompt + [advantage] * n_sampled
    mask = [0.0] * n_prompt + [1.0] * n_sampled
    return DatumSpec(input_tokens=seq[:-1], target_tokens=seq[1:], logprobs=lq, advantages=adv, mask=mask)


BATCH = [_datum(1, 1.0), _datum(2, -1.0), _datum(3, 0.5, n_prompt=5, n_sampled=4)]


def _lora(learner: Any) -> dict[str, Any]:
    from adapters.local_learner.lora import lora_state

    return lora_state(learner.model)


async def test_two_steps_change_the_lora_weights_with_a_finite_loss(learner: Any) -> None:
    import torch

    before = _lora(learner)
    assert all(float(v.abs().sum()) == 0.0 for k, v in before.items() if "lora_B" in k)  # step 0 is the base model
    metrics = []
    for loss_fn, cfg in (("importance_sampling", None), ("ppo", CLIP)):
        out = await learner.train_step(BATCH, loss_fn=loss_fn, loss_fn_config=cfg, learning_rate=1e-3)
        metrics.append(out.metrics)
    after = _lora(learner)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before), "every adapter matrix moves after two steps"
    assert all(math.isfinite(v) for m in metrics for v in m.values())
    assert metrics[0]["local/sampled_tokens"] == 24 and metrics[1]["local/steps"] == 2
    assert metrics[0]["local/grad_norm"] > 0 and metrics[1]["optim/lr"] == 1e-3
    # One learner step moved the weights, so the second step's learner logprobs differ from the first's.
    assert metrics[0]["local/kl_sampler_learner"] != metrics[1]["local/kl_sampler_learner"]


async def test_a_bad_batch_is_refused_before_anything_changes(learner: Any) -> None:
    steps = learner.steps
    with pytest.raises(ValueError, match="no datums"):
        await learner.train_step([], loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-3)
    bad = DatumSpec(input_tokens=[1, 2], target_tokens=[2], logprobs=[0, 0], advantages=[0, 0], mask=[0, 0])
    with pytest.raises(ValueError, match="target_tokens has 1 entries for 2 input tokens"):
        await learner.train_step([bad], loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-3)
    assert learner.steps == steps


async def test_state_checkpoint_round_trip_and_resume(learner: Any, run_dir: Path) -> None:
    import torch

    from adapters.local_learner.checkpoint import CheckpointError

    if learner.steps == 0:  # run alone: give the optimizer a state to save
        await learner.train_step(BATCH, loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-3)
    state_path, sampler_path = await learner.save("step_000002", with_state=True)
    assert state_path == "local:checkpoints/step_000002.state"
    assert sampler_path == "local:checkpoints/step_000002.sampler"
    assert learner.last_state_path == state_path
    restored = make_learner(run_dir, resume_state_path=state_path)
    a, b = _lora(learner), _lora(restored)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    adam_a, adam_b = learner.adam_state(), restored.adam_state()
    assert len(adam_a) == 3 * len(learner.params) and adam_a.keys() == adam_b.keys()
    assert all(torch.equal(adam_a[k], adam_b[k]) for k in adam_a)
    assert restored.steps == learner.steps

    # The same next step from the original and from the restored learner: the same weights, bit for bit.
    step = {"loss_fn": "ppo", "loss_fn_config": CLIP, "learning_rate": 5e-4}
    await learner.train_step(BATCH, **step)
    await restored.train_step(BATCH, **step)
    a, b = _lora(learner), _lora(restored)
    assert all(torch.equal(a[k], b[k]) for k in a)

    # Sampler weights carry no optimizer state (as Tinker): they do not resume. Nor does another base model.
    with pytest.raises(CheckpointError, match=r"not a state checkpoint \(\*\.state\)"):
        make_learner(run_dir, resume_state_path=sampler_path)
    with pytest.raises(CheckpointError, match="not a local checkpoint"):
        make_learner(run_dir, resume_state_path="tinker://x/state")
    from adapters.local_learner.learner import LocalLearner

    with pytest.raises(CheckpointError, match="has rank 4, the run config 8"):
        LocalLearner(run_dir, base_model=BASE, rank=8, device="cpu", resume_state_path=state_path)


async def test_saving_a_name_again_replaces_it(run_dir: Path) -> None:
    import torch

    from adapters.local_learner.checkpoint import read_checkpoint, write_checkpoint

    for value in (1.0, 2.0):
        write_checkpoint(run_dir, "local:checkpoints/again.sampler", lora={"w": torch.full((2,), value)}, meta={})
    lora, _meta, adam = read_checkpoint(run_dir, "local:checkpoints/again.sampler", with_state=False)
    assert lora["w"].tolist() == [2.0, 2.0] and adam is None
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if "again" in p.name) == ["again.sampler"]


async def test_the_no_learning_control_computes_each_step_but_applies_none(tmp_path: Path) -> None:
    """``learn = False`` (``[backend] learn = false``): the same loss and gradient are computed and reported, the
    adapter stays at its initial value (the agent stays the base model)."""
    control = make_learner(tmp_path, learn=False)
    before = _lora(control)
    out = await control.train_step(BATCH, loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-3)
    assert out.metrics["local/grad_norm"] > 0 and out.metrics["local/applied"] == 0.0 and control.steps == 1
    after = _lora(control)
    assert all(bool((before[k] == after[k]).all()) for k in before)
