"""The agent-facing description of the reward, for the workspace template's instructions.

As in the seed, the agent sees a simplified view: the uplift/absolute split inside job quality and a nudge
towards fewer attempts, not the full validation/quality/speed weights. The text is generated from the
reward config so that it never drifts from what is computed.
"""

from __future__ import annotations

from handlers.reward.formula import RewardConfig

__all__ = ["agent_reward_text"]


def _percent(part: float, whole: float) -> int:
    return round(100 * part / whole) if whole else 0


def agent_reward_text(config: RewardConfig | None = None) -> str:
    """Markdown for the agent's instructions: how its job is graded, in the terms it can act on."""
    c = config or RewardConfig()
    split = c.quality_absolute + c.quality_uplift
    uplift_pct = _percent(c.quality_uplift, split)
    absolute_pct = 100 - uplift_pct if split else 0
    return f"""\
## How your work is graded

- **Model quality is what counts most.** After training, the model is scored on a hidden eval set for the
  task. Your grade is {uplift_pct}% *uplift* (the trained model's score minus the best score any untrained
  base model gets on that eval; see `get_baseline_scores`) and {absolute_pct}% the trained model's absolute
  score. Pick the base model and training setup that end highest *above* that baseline.
- **Fewer attempts is better.** Every `submit_job` that fails validation lowers your grade; a job that
  validates on the first try gets full credit for validity. Check your work before you submit.
- **A job that crashes during training earns no quality credit**, so prefer a config that surely runs.
- **An episode that never makes a parseable submission is penalised** below one that tried and failed.
"""
