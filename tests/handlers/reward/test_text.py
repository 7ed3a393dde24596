"""The agent-facing reward text follows the config's quality split and nudges towards fewer attempts."""

from __future__ import annotations

from handlers.reward.formula import RewardConfig
from handlers.reward.text import agent_reward_text


def test_default_text_is_the_seeds_simplified_view() -> None:
    text = agent_reward_text()
    assert "75% *uplift*" in text and "25% the trained model's absolute" in text
    assert "Fewer attempts is better" in text
    assert "0.35" not in text and "0.05" not in text  # the full weights are not shown to the agent


def test_text_follows_the_config() -> None:
    text = agent_reward_text(RewardConfig(quality_absolute=0.4, quality_uplift=0.6))
    assert "60% *uplift*" in text and "40% the trained model's absolute" in text
