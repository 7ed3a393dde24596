"""The policy-gradient losses of the local learner, with Tinker's semantics (shared/notes/tinker.md, section 5).

Every loss takes, per token of a datum, the learner's log-prob ``lp`` of the target token (computed now, with
gradients), the sampler's log-prob ``lq`` (recorded when the token was sampled; 0 on prompt positions) and the
advantage ``A`` (0 on prompt positions), and is SUMMED over tokens and datums (no mean), as Tinker's are:

- ``importance_sampling``: ``-sum(exp(lp - lq) * A)``;
- ``ppo``: ``-sum(min(r * A, clip(r, low, high) * A))`` with ``r = exp(lp - lq)`` and ratio bounds ``low`` /
  ``high`` (``loss_fn_config``'s ``clip_low_threshold`` / ``clip_high_threshold``, e.g. 0.8 / 1.2);
- ``cispo``: ``-sum(stopgrad(clip(r, low, high)) * lp * A)``.

The datum's ``mask`` is not an input: Tinker drops it and the zero advantages already mark the prompt. It is
used only for the metrics (ratio, clip fraction and sampler-learner KL over the sampled tokens).
``dro`` and ``gspo`` are not implemented here; :data:`LOCAL_LOSSES` is what the run config accepts.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

__all__ = ["LOCAL_LOSSES", "LossParts", "policy_loss"]

LOCAL_LOSSES: tuple[str, ...] = ("importance_sampling", "ppo", "cispo")


class LossParts:
    """The summed loss (differentiable) and the sums its metrics are made of (plain floats)."""

    def __init__(self, loss: Tensor, *, ratio_sum: float, clipped: float, kl_sum: float, tokens: float) -> None:
        self.loss = loss
        self.ratio_sum = ratio_sum  # sum of r over the sampled (mask > 0) tokens
        self.clipped = clipped  # sampled tokens whose ratio lies outside [low, high]
        self.kl_sum = kl_sum  # sum of lq - lp over the sampled tokens (an estimate of KL(sampler || learner))
        self.tokens = tokens  # sampled tokens


def _bounds(loss_fn: str, config: Mapping[str, float] | None) -> tuple[float, float]:
    cfg = dict(config or {})
    try:
        low, high = float(cfg["clip_low_threshold"]), float(cfg["clip_high_threshold"])
    except KeyError as exc:
        raise ValueError(f"loss_fn {loss_fn!r} needs loss_fn_config {exc.args[0]!r}") from None
    if not 0.0 < low < 1.0 < high:
        raise ValueError(f"loss_fn {loss_fn!r}: need 0 < clip_low_threshold < 1 < clip_high_threshold")
    return low, high


def policy_loss(
    loss_fn: str,
    learner_logprobs: Tensor,
    sampler_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    config: Mapping[str, float] | None = None,
) -> LossParts:
    """The ``loss_fn`` loss over same-shaped tensors of per-token values (any shape; padding must carry A = 0
    and mask = 0). Raises ``ValueError`` for a loss this learner does not implement."""
    if loss_fn not in LOCAL_LOSSES:
        raise ValueError(f"loss_fn: {loss_fn!r} is not one the local learner implements ({', '.join(LOCAL_LOSSES)})")
    lp = learner_logprobs.float()
    lq = sampler_logprobs.float()
    adv = advantages.float()
    ratio = torch.exp(lp - lq)
    sampled = mask.float() > 0
    low, high = (0.0, float("inf"))
    if loss_fn == "importance_sampling":
        loss = -(ratio * adv).sum()
    else:
        low, high = _bounds(loss_fn, config)
        clipped_ratio = ratio.clamp(low, high)
        if loss_fn == "ppo":
            loss = -torch.minimum(ratio * adv, clipped_ratio * adv).sum()
        else:  # cispo
            loss = -(clipped_ratio.detach() * lp * adv).sum()
    with torch.no_grad():
        r = ratio[sampled]
        return LossParts(
            loss,
            ratio_sum=float(r.sum()),
            clipped=float(((r < low) | (r > high)).sum()),
            kl_sum=float((lq - lp)[sampled].sum()),
            tokens=float(sampled.sum()),
        )
