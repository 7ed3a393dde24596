"""benchmarks/replica_bandit.py: the real agent, datums and local learner, with rewards from the grid's table."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest


@pytest.mark.slow  # two outer steps of the real tiny agent and local learner (2 episodes each)
def test_two_steps_train_the_lora_on_the_grids_rewards(tmp_path: Path) -> None:
    # Imported here: the tool imports torch and transformers, which collecting the suite must not load.
    from benchmarks.replica_bandit import BANNER, GRID, main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--steps", "2", "--group-size", "2", "--tasks-per-batch", "1", "--json", str(tmp_path / "r.json")])
    assert code == 0
    assert BANNER in out.getvalue()  # the output says the inner jobs are simulated
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["lora_max_change"] > 0  # the learner's steps moved the adapter
    grid = json.loads(GRID.read_text())["choices"]
    scored = 0
    for step in result["steps"]:
        for label, family, reward in zip(step["labels"], step["families"], step["rewards"], strict=True):
            if "/" in label:  # a choice: its reward is the table's entry for (choice, family)
                assert reward == grid[label]["per_family"][family]["reward_mean"]
                scored += 1
            else:  # a format failure: the real formula's reward for it
                assert reward == {"no_submission": -0.1, "not_validated": 0.0}[label]
    assert scored > 0
