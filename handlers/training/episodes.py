"""What the learner consumes: finished episodes (reward + sampled turns + sampler version), in groups."""

from __future__ import annotations

import msgspec

from handlers.training.datums import SampledTurn

__all__ = ["EpisodeGroup", "FinishedEpisode", "turn_from_training"]


class FinishedEpisode(msgspec.Struct, frozen=True, kw_only=True):
    episode_id: str
    task_id: str
    sampler_version: int  # the sampler the episode's turns were sampled with
    reward: float
    turns: list[SampledTurn]
    # Ended by the run or global budget cap (reward.computed budget_refused): the reward says nothing about the
    # policy, so the learner leaves the episode out (docs/reward.md). An episode-budget refusal is not capped.
    capped: bool = False


class EpisodeGroup(msgspec.Struct, frozen=True, kw_only=True):
    """The G episodes of one task; GRPO's baseline is the group mean, so a group trains whole or not at all."""

    task_id: str
    episodes: list[FinishedEpisode]

    def __post_init__(self) -> None:
        if not self.episodes:
            raise ValueError(f"EpisodeGroup {self.task_id}: no episodes")
        for ep in self.episodes:
            if ep.task_id != self.task_id:
                raise ValueError(f"EpisodeGroup {self.task_id}: episode {ep.episode_id} is for task {ep.task_id}")

    @property
    def sampler_version(self) -> int:
        """The oldest sampler any member used: the group is as stale as its stalest episode."""
        return min(ep.sampler_version for ep in self.episodes)


def turn_from_training(training: dict[str, object]) -> tuple[SampledTurn, int]:
    """A stored turn's ``training`` dict (see adapters/tinker/policy.py) -> (turn, sampler version)."""
    try:
        return (
            msgspec.convert(
                {k: training[k] for k in ("prompt_tokens", "sampled_tokens", "sampled_logprobs")}, SampledTurn
            ),
            int(training["sampler_version"]),  # type: ignore[call-overload]
        )
    except (KeyError, msgspec.ValidationError, TypeError, ValueError) as exc:
        raise ValueError(f"turn training record: {exc}") from exc
