"""The local learner's runs are reproducible and survive a kill (issue 19), on the replica's CI smoke config
(examples/configs/replica_smoke.toml: two synchronous steps of 2 tasks x group 2, the tiny trainer agent
``tiny-agent`` (fixtures/tiny/tiny-agent) writing and submitting real replica job.toml files, the local learner on
the CPU, the stand-in inner trainer so that jobs take no time and their scores still differ by choice):

- the smoke: the LoRA weights moved and every step's loss is finite;
- the same config and seed give the same rewards; and ``kill -9`` in the middle of an outer step, then
  ``ait resume``, ends with the same state hash (:func:`tests.cli.train_digest.trained_digest`: samples,
  rewards, datums, adapter and Adam tensors, bit for bit) as the uninterrupted run, nothing counted twice.

Every run is its own ``ait`` process (the killed one must be), all with the same torch thread count.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from engine.log import read_log
from events import AgentTurnTaken, LoRAStepApplied, RewardComputed
from tests.cli.train_digest import duplicates, trained_digest
from tests.fakes.ait_process import ROOT, run_ait

SMOKE = ROOT / "examples" / "configs" / "replica_smoke.toml"

pytestmark = pytest.mark.slow  # each run loads torch, peft and the tiny agent in a fresh process


def _ait(runs: Path, *args: str, kill_after: int | None = None) -> subprocess.CompletedProcess[str]:
    # One torch thread: the same kernels in every run, however many cores the machine has.
    return run_ait(runs, *args, kill_after=kill_after, threads=1, timeout=300)


def _rewards(run: Path) -> list[tuple[str, float]]:
    """Each episode's reward, by episode id (episodes of one step finish in any order)."""
    return sorted(
        (r.event.episode_id, r.event.reward)
        for r in read_log(run / "events.jsonl").records
        if isinstance(r.event, RewardComputed)
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("ref")
    done = _ait(runs, "train", "--config", str(SMOKE), "--run-id", "ref")
    assert done.returncode == 0, done.stderr[-3000:]
    return runs / "ref"


def test_the_smoke_moves_the_lora_weights_with_a_finite_loss(reference: Path) -> None:
    from safetensors.numpy import load_file

    steps = [r.event for r in read_log(reference / "events.jsonl").records if isinstance(r.event, LoRAStepApplied)]
    assert [s.step for s in steps] == [0, 1]
    assert all(math.isfinite(s.metrics["loss:sum"]) and math.isfinite(s.metrics["local/grad_norm"]) for s in steps)
    lora = load_file(str(reference / "checkpoints" / "step_000002.state" / "lora.safetensors"))
    moved = [k for k, v in lora.items() if "lora_B" in k and abs(v).max() > 0]
    assert moved, "every lora_B is still 0: the adapter never left its initial value"


@pytest.fixture(scope="module")
def rerun(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same config and seed in another process, killed (SIGKILL) in the middle of outer step 1 and resumed
    with ``ait resume``: step 0 is a plain rerun, step 1 a resumed one. (One run for both checks: each costs a
    process loading torch, and the suite's time is counted.)"""
    runs = tmp_path_factory.mktemp("rerun")
    records = read_log(reference / "events.jsonl").records
    first_step = next(r.seq for r in records if isinstance(r.event, LoRAStepApplied))
    # Right after the second sampled turn of step 1 (the run is synchronous: that is inside the step).
    at = [r.seq for r in records if isinstance(r.event, AgentTurnTaken) and r.seq > first_step][1]
    killed = _ait(runs, "train", "--config", str(SMOKE), "--run-id", "crash", kill_after=at)
    assert killed.returncode == -9, (at, killed.returncode, killed.stderr[-3000:])
    crashed = read_log(runs / "crash" / "events.jsonl").records
    applied = sum(isinstance(r.event, LoRAStepApplied) for r in crashed)
    assert applied == 1, f"the kill landed after {applied} applied step(s), not inside step 1"
    resumed = _ait(runs, "resume", "crash")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return runs / "crash"


def test_the_same_seed_gives_the_same_rewards(reference: Path, rerun: Path) -> None:
    assert len(_rewards(reference)) == 8  # 2 steps x 2 tasks x group 2
    assert _rewards(rerun) == _rewards(reference)


def test_killed_mid_step_and_resumed_ends_with_the_same_state_hash(reference: Path, rerun: Path) -> None:
    digest, data = trained_digest(rerun)
    ref_digest, ref_data = trained_digest(reference)
    assert data == ref_data and digest == ref_digest  # samples, rewards, datums, adapter and Adam tensors
    assert duplicates(rerun) == []
