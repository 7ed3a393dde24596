"""The committed golden run is exactly what tests/golden/make_run_log.py writes, and it replays cleanly.

If the first test fails, an event schema, the reward code or the scenario changed: regenerate with
``.venv/bin/python -m tests.golden.make_run_log`` and commit fixtures/golden/run/ with the change that caused it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.replay import replay
from tests.golden.make_run_log import OUT, generate
from views.watch.folder import watch_projections


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_committed_golden_run_equals_what_the_script_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Durability is not under test here; skipping fsync keeps the regeneration fast on a busy disk.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    fresh = _files(generate(tmp_path / "run"))
    committed = _files(OUT)
    assert sorted(fresh) == sorted(committed), "blob set differs: regenerate with python -m tests.golden.make_run_log"
    for name, data in fresh.items():
        assert committed[name] == data, f"{name} differs: regenerate with python -m tests.golden.make_run_log"


def test_golden_run_replays_with_every_reward_recomputing() -> None:
    result = replay(OUT / "events.jsonl", watch_projections(), verify=True)
    assert result.mismatches == []
    assert result.by_type["reward.computed"] > 0
    # every reward, and every settled cost (the training-cost deriver re-prices the kind "training" ones)
    assert result.verified == result.by_type["reward.computed"] + result.by_type["cost.settled"]
    assert result.states["queue"].anomalies == 0 and result.states["fleet"].anomalies == 0
    assert result.states["run"].status == "finished:ok"
    # What the dashboard and report tests rely on being present.
    for kind in ("pod.lost", "job.requeued", "job.failed", "submission.rejected", "pod.provision_failed"):
        assert result.by_type[kind] >= 1, kind
    statuses = result.states["run"].episodes_finished
    assert {"validated", "rejected", "no_submission"} <= set(statuses)
