"""Trajectories -> datums, with the alignment Tinker expects.

A trajectory is the agent's sampled turns in order. Turn ``k``'s prompt usually *extends* the previous
prompt + sampled tokens (the chat template re-renders the same history and appends tool results); such turns
share one datum, so the shared prefix is trained once. A turn whose prompt does not extend it (a template
that rewrites history, e.g. strips thinking) starts a new datum.

Each datum covers a full token sequence ``seq``: input = ``seq[:-1]``, targets = ``seq[1:]``; position ``i``
predicts ``seq[i+1]``, so the sampler logprob, advantage and mask of target ``seq[i+1]`` sit at ``i``.
Prompt (observation) tokens get logprob 0, advantage 0, mask 0; sampled tokens get the sampler's logprob,
the episode's advantage and mask 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from handlers.ports.learner import DatumSpec

__all__ = ["DatumSpec", "SampledTurn", "trajectory_to_datums"]


class SampledTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One agent turn as sampled: the prompt ids, the sampled ids and their sampler logprobs."""

    prompt_tokens: list[int]
    sampled_tokens: list[int]
    sampled_logprobs: list[float]

    def __post_init__(self) -> None:
        if len(self.sampled_tokens) != len(self.sampled_logprobs):
            raise ValueError(
                f"SampledTurn: {len(self.sampled_tokens)} sampled tokens but {len(self.sampled_logprobs)} logprobs"
            )


class _Builder:
    """The sequence being accumulated for one datum, with per-token (logprob, advantage, mask)."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.advantages: list[float] = []
        self.mask: list[float] = []

    def extends_to(self, prompt: Sequence[int]) -> bool:
        n = len(self.tokens)
        return len(prompt) >= n and list(prompt[:n]) == self.tokens

    def add(self, tokens: Sequence[int], logprobs: Sequence[float], advantage: float, mask: float) -> None:
        self.tokens.extend(tokens)
        self.logprobs.extend(logprobs)
        self.advantages.extend([advantage * mask] * len(tokens))
        self.mask.extend([mask] * len(tokens))

    def build(self) -> DatumSpec | None:
        if len(self.tokens) < 2 or not any(self.mask):
            return None  # nothing to predict or nothing sampled: no gradient
        return DatumSpec(
            input_tokens=self.tokens[:-1],
            target_tokens=self.tokens[1:],
            logprobs=self.logprobs[1:],
            advantages=self.advantages[1:],
            mask=self.mask[1:],
        )


def trajectory_to_datums(turns: Sequence[SampledTurn], advantage: float) -> list[DatumSpec]:
    """The datums of one trajectory, every sampled token weighted by the episode's ``advantage``."""
    out: list[DatumSpec] = []
    cur = _Builder()
    for turn in turns:
        if cur.tokens and not cur.extends_to(turn.prompt_tokens):
            done = cur.build()
            if done is not None:
                out.append(done)
            cur = _Builder()
        new_prompt = turn.prompt_tokens[len(cur.tokens) :]
        cur.add(new_prompt, [0.0] * len(new_prompt), advantage, 0.0)
        cur.add(turn.sampled_tokens, turn.sampled_logprobs, advantage, 1.0)
    done = cur.build()
    if done is not None:
        out.append(done)
    return out
