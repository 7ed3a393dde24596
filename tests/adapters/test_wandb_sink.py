"""The optional W&B sink: off unless configured; mirrors per-step metrics equal to the log's; real wandb offline
when it is installed (it is not a dependency)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from adapters.wandb_sink import WandbConfig, WandbSink, config_from_run, mirror_run, wandb_reactor
from engine.clock import ManualClock
from engine.runtime import Runtime
from events import BatchCollected, LoRAStepApplied, RewardComputed, RunStarted
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward
from tests.golden.facts import GOLDEN_EVENTS, golden_records, mean, of_type, rewards_by_episode, step_episodes


class FakeRun:
    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, float]]] = []
        self.finished = False

    def log(self, data: dict[str, float], step: int) -> None:
        assert not self.finished
        self.rows.append((step, dict(data)))

    def finish(self) -> None:
        self.finished = True


class FakeWandb:
    """Shaped like the wandb module: ``init(**kwargs)`` returns a run with ``log`` and ``finish``."""

    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}
        self.run = FakeRun()

    def init(self, **kwargs: Any) -> FakeRun:
        self.kwargs = kwargs
        return self.run


def test_off_unless_configured() -> None:
    assert config_from_run({}) is None
    assert config_from_run({"wandb": {}}) is None
    cfg = config_from_run({"wandb": {"project": "ait", "mode": "offline", "tags": ["x"]}})
    assert cfg == WandbConfig(project="ait", mode="offline", tags=["x"])
    with pytest.raises(ValueError, match=r"run.toml: \[wandb\] has unknown key\(s\) \['projct'\]"):
        config_from_run({"wandb": {"project": "p", "projct": "q"}}, source="run.toml")
    with pytest.raises(ValueError, match=r"wandb\.mode"):
        WandbConfig(project="p", mode="sometimes")


def test_mirrors_the_golden_run_step_by_step(tmp_path: Path) -> None:
    fake = FakeWandb()
    sink = mirror_run(GOLDEN_EVENTS, WandbConfig(project="ait", mode="offline", dir=str(tmp_path)), module=fake)
    assert fake.kwargs["project"] == "ait" and fake.kwargs["id"] == "golden-run" and fake.kwargs["resume"] == "allow"
    assert fake.kwargs["mode"] == "offline" and fake.kwargs["config"]["outer"]["steps"] == 4
    assert fake.run.finished and sink.logged == len(fake.run.rows)
    records = golden_records()
    rewards = rewards_by_episode(records)
    by_step: dict[int, dict[str, float]] = {}
    for step, data in fake.run.rows:
        by_step.setdefault(step, {}).update(data)
    assert [s for s, _ in fake.run.rows] == sorted(s for s, _ in fake.run.rows), "W&B steps never go back"
    for step, ids in step_episodes(records).items():
        rs = [rewards[e] for e in ids]
        m = by_step[step]
        assert m["reward/mean"] == pytest.approx(mean([r.reward for r in rs]))
        assert m["reward/quality"] == pytest.approx(mean([r.w_quality * r.quality for r in rs]))
        assert m["episodes/validated_rate"] == pytest.approx(mean([float(r.validated) for r in rs]))
    for lora in of_type(records, LoRAStepApplied):
        assert by_step[lora.step]["train/loss"] == lora.metrics["loss"]


async def test_live_reactor_logs_as_the_run_goes(tmp_path: Path) -> None:
    fake = FakeWandb()
    sink = WandbSink(WandbConfig(project="p"), "live", module=fake)
    rc = compute_reward(RewardInputs(episode_id="e1", parseable=True, attempts=1, validated=True), RewardConfig())
    async with Runtime(tmp_path / "live", [], clock=ManualClock()) as rt:
        rt.start_reactor(wandb_reactor(sink))
        await rt.emit(RunStarted(run_id="live", seed=1, code_version="t"))
        await rt.emit(rc)
        await rt.emit(BatchCollected(step=1, episode_ids=["e1"]))
        await rt.emit(LoRAStepApplied(step=1, metrics={"loss": 0.5}))
    assert fake.run.finished
    assert fake.run.rows[0][0] == 1 and fake.run.rows[0][1]["reward/mean"] == pytest.approx(rc.reward)
    assert fake.run.rows[1] == (1, {"train/loss": 0.5})
    assert isinstance(rc, RewardComputed)


def test_real_wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    sink = mirror_run(GOLDEN_EVENTS, WandbConfig(project="ait-test", mode="offline", dir=str(tmp_path)))
    assert sink.logged > 0
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert runs and any(p.suffix == ".wandb" for p in runs[0].iterdir())
    assert os.environ["WANDB_MODE"] == "offline"
