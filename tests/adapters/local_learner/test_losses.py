"""Tinker's losses in torch, against values worked out by hand (shared/notes/tinker.md, section 5)."""

from __future__ import annotations

import math

import pytest

CLIP = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}


def _example() -> tuple[object, object, object, object]:
    """Three tokens: a prompt token (lq = 0, A = 0, mask 0) and two sampled ones.

    token 1: lp = log 0.5, lq = log 0.25 -> r = 2.0, A = +1   (ratio above the band: clipped to 1.2)
    token 2: lp = log 0.3, lq = log 0.6  -> r = 0.5, A = -2   (ratio below the band: clipped to 0.8)
    """
    import torch

    lp = torch.tensor([math.log(0.9), math.log(0.5), math.log(0.3)], requires_grad=True)
    lq = torch.tensor([0.0, math.log(0.25), math.log(0.6)])
    adv = torch.tensor([0.0, 1.0, -2.0])
    mask = torch.tensor([0.0, 1.0, 1.0])
    return lp, lq, adv, mask


def test_importance_sampling_by_hand() -> None:
    from adapters.local_learner.losses import policy_loss

    lp, lq, adv, mask = _example()
    parts = policy_loss("importance_sampling", lp, lq, adv, mask)  # type: ignore[arg-type]
    # -(2.0 * 1 + 0.5 * -2) = -(2 - 1) = -1; the prompt token adds 0 * 0.9
    assert parts.loss.item() == pytest.approx(-1.0, abs=1e-6)
    parts.loss.backward()
    # d/d lp of -r * A is -r * A: [0, -2, +1]
    assert lp.grad.tolist() == pytest.approx([0.0, -2.0, 1.0], abs=1e-6)  # type: ignore[attr-defined]
    assert parts.tokens == 2 and parts.ratio_sum == pytest.approx(2.5) and parts.clipped == 0
    assert parts.kl_sum == pytest.approx(math.log(0.25 / 0.5) + math.log(0.6 / 0.3), abs=1e-6)


def test_ppo_by_hand() -> None:
    from adapters.local_learner.losses import policy_loss

    lp, lq, adv, mask = _example()
    parts = policy_loss("ppo", lp, lq, adv, mask, CLIP)  # type: ignore[arg-type]
    # token 1: min(2.0 * 1, 1.2 * 1) = 1.2; token 2: min(0.5 * -2, 0.8 * -2) = min(-1, -1.6) = -1.6
    assert parts.loss.item() == pytest.approx(-(1.2 - 1.6), abs=1e-6)
    parts.loss.backward()
    # token 1 takes the clipped (constant) branch: no gradient; token 2 the clipped one too (-1.6 < -1.0)
    assert lp.grad.tolist() == pytest.approx([0.0, 0.0, 0.0], abs=1e-6)  # type: ignore[attr-defined]
    assert parts.clipped == 2


def test_ppo_inside_the_band_is_importance_sampling() -> None:
    import torch

    from adapters.local_learner.losses import policy_loss

    lp = torch.tensor([math.log(0.55)], requires_grad=True)
    lq = torch.tensor([math.log(0.5)])  # r = 1.1, inside [0.8, 1.2]
    adv, mask = torch.tensor([3.0]), torch.tensor([1.0])
    ppo = policy_loss("ppo", lp, lq, adv, mask, CLIP)
    ppo.loss.backward()
    assert ppo.loss.item() == pytest.approx(-3.3, abs=1e-5) and ppo.clipped == 0
    assert lp.grad.tolist() == pytest.approx([-3.3], abs=1e-5)  # type: ignore[union-attr]


def test_cispo_by_hand() -> None:
    from adapters.local_learner.losses import policy_loss

    lp, lq, adv, mask = _example()
    parts = policy_loss("cispo", lp, lq, adv, mask, CLIP)  # type: ignore[arg-type]
    # -(sg(1.2) * log 0.5 * 1 + sg(0.8) * log 0.3 * -2)
    want = -(1.2 * math.log(0.5) * 1.0 + 0.8 * math.log(0.3) * -2.0)
    assert parts.loss.item() == pytest.approx(want, abs=1e-5)
    parts.loss.backward()
    # the clipped ratio is a constant: d/d lp = -clip(r) * A
    assert lp.grad.tolist() == pytest.approx([0.0, -1.2, 1.6], abs=1e-6)  # type: ignore[attr-defined]


def test_losses_refused_with_a_reason() -> None:
    import torch

    from adapters.local_learner.losses import policy_loss

    t = torch.zeros(2)
    with pytest.raises(ValueError, match="'dro' is not one the local learner implements"):
        policy_loss("dro", t, t, t, t)
    with pytest.raises(ValueError, match="needs loss_fn_config 'clip_low_threshold'"):
        policy_loss("ppo", t, t, t, t, None)
    with pytest.raises(ValueError, match="0 < clip_low_threshold < 1 < clip_high_threshold"):
        policy_loss("ppo", t, t, t, t, {"clip_low_threshold": 1.1, "clip_high_threshold": 1.2})


def test_the_run_config_accepts_exactly_the_implemented_losses() -> None:
    from adapters.local_learner.losses import LOCAL_LOSSES
    from cli.train_config import LOCAL_LOSSES as CONFIG_LOSSES
    from handlers.training import LOSSES

    assert CONFIG_LOSSES == LOCAL_LOSSES and set(LOCAL_LOSSES) <= set(LOSSES)
