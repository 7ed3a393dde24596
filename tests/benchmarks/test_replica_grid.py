"""benchmarks/replica_grid.py's summary (the real inner jobs are the benchmark, not a test): rewards from the real
formula with the replica's weights, best_pre as the better base, and the best choices by a paired comparison."""

from __future__ import annotations

import pytest

from benchmarks.replica_grid import REWARD, bootstrap_ci, markdown_table, summarise, with_overrides
from families.spec import load_spec
from handlers.episode.choice import MODELS, Choice, all_choices, job_text
from handlers.episode.job_config import parse_job_config
from handlers.episode.setup import TEMPLATE_DIR

SPEC = load_spec(TEMPLATE_DIR.parent / "examples" / "replica" / "tasks" / "calc_chain_v1_fast.json")
POSTS = {"correct": 0.1, "partial": 0.09, "everything": 0.0, "wrong": -0.1}  # post = pre + this
PRE = {MODELS[0]: 0.3, MODELS[1]: 0.4}
LR = {"1e-05": 0.0, "3e-05": -0.15}  # the larger learning rate overshoots


def _jobs() -> list[dict[str, object]]:
    jobs: list[dict[str, object]] = []
    for seed in (0, 1):
        for family in ("calc_chain", "ledger"):
            for c in all_choices():
                post = PRE[c.model] + POSTS[c.rubric] + LR[c.learning_rate] + 0.01 * seed
                jobs.append(
                    {"family": family, "label": c.label, "model": c.model, "rubric": c.rubric, "seed": seed}
                    | {"ok": True, "pre": PRE[c.model], "post": post, "train_seconds": 1.0}
                )
    return jobs


def test_the_summary_uses_the_replica_reward_and_the_better_base() -> None:
    assert REWARD.w_speed == 0.0
    jobs = _jobs()
    summary = summarise(jobs, all_choices(), ["calc_chain", "ledger"])
    assert summary["baselines"]["ledger"] == PRE
    top = next(j for j in jobs if j["label"] == "1.7B/correct/1e-05" and j["seed"] == 0)
    post = 0.5
    expected = REWARD.w_validation + REWARD.w_quality * (0.25 * post + 0.75 * (post - 0.4))
    assert top["reward"] == pytest.approx(expected)
    assert summary["top"] == "1.7B/correct/1e-05" and summary["best"] == ["1.7B/correct/1e-05"]
    assert summary["choices"]["0.6B/wrong/3e-05"]["n"] == 4
    assert "**1.7B/correct/1e-05**" in markdown_table(summary, ["calc_chain", "ledger"])


def test_a_choice_the_grid_cannot_tell_from_the_top_is_among_the_best() -> None:
    jobs = _jobs()
    for j in jobs:  # partial scores the same as correct except on one seed of one family, where it is better
        if j["rubric"] == "partial":
            j["post"] = float(j["post"]) + 0.01 + (0.02 if (j["seed"], j["family"]) == (1, "ledger") else -0.005)
    summary = summarise(jobs, all_choices(), ["calc_chain", "ledger"])
    assert set(summary["best"]) == {"1.7B/correct/1e-05", "1.7B/partial/1e-05"}


def test_bootstrap_and_overrides() -> None:
    assert bootstrap_ci([0.5]) == (0.5, 0.5)
    lo, hi = bootstrap_ci([0.1, 0.2, 0.3, 0.4])
    assert 0.1 <= lo < 0.25 < hi <= 0.4
    text = with_overrides(job_text(Choice(MODELS[0], "correct", "1e-05"), SPEC), {"max_steps": "3"})
    assert parse_job_config(text).prime_rl.max_steps == 3
    with pytest.raises(SystemExit, match="not a line"):
        with_overrides(text, {"nope": "1"})
