"""Loss selection: which Tinker loss the learner step uses, and the ``loss_fn_config`` it needs.

All of these run on the Tinker server and take ``target_tokens``, ``logprobs`` (the sampler's) and
``advantages``. ``importance_sampling`` is the seed's default; with staleness > 0 a clipped loss (``ppo``) is
the safer choice (docs/outer-rl.md). ``stable_reinforce`` needs provenance spans that we do not send yet,
and ``cross_entropy`` / ``custom`` are not policy-gradient losses, so neither is selectable.
"""

from __future__ import annotations

__all__ = ["CLIPPED_LOSSES", "LOSSES", "loss_fn_config"]

LOSSES: tuple[str, ...] = ("importance_sampling", "ppo", "cispo", "dro", "gspo")
CLIPPED_LOSSES: frozenset[str] = frozenset({"ppo", "cispo", "gspo"})


def loss_fn_config(loss_fn: str, *, clip_low: float, clip_high: float) -> dict[str, float] | None:
    """The ``loss_fn_config`` for ``forward_backward`` (None when the loss takes none)."""
    if loss_fn not in LOSSES:
        raise ValueError(f"loss_fn: {loss_fn!r} is not one of {', '.join(LOSSES)}")
    if loss_fn in CLIPPED_LOSSES:
        return {"clip_low_threshold": clip_low, "clip_high_threshold": clip_high}
    return None
