"""Crash-resume property: ``ait train`` on the smoke config, SIGKILLed at random event boundaries (several
times per run, ``AIT_KILL_AFTER_SEQ``), then ``ait resume`` until it finishes, ends in the same trained state
as an uninterrupted run: the same episodes trained at each step with the same rewards, job results, datums and
tokens, the learner restored to the same counters; no group, episode, turn, submission, reward, job, job result,
cost or step recorded twice, and no trained episode without its reward. Local subprocess pods that outlive a
killed controller are adopted by the resumed one, and none is left running at the end.

Kill points are drawn from ``random.Random(seed)``; the seed is in the test id, so a failure replays.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from engine.log import read_log
from tests.cli.train_digest import duplicates, trained_digest
from tests.fakes.ait_process import ROOT, run_ait

SMOKE = ROOT / "examples" / "configs" / "smoke.toml"


def _events(run: Path) -> int:
    return len(read_log(run / "events.jsonl").records) if (run / "events.jsonl").exists() else 0


def _no_live_pods(runs: Path) -> list[str]:
    alive = []
    for record in (runs / ".local-pods").glob("*/pod.json"):
        pod = json.loads(record.read_text())
        try:
            os.kill(pod["pid"], 0)
        except ProcessLookupError:
            continue
        with open(f"/proc/{pod['pid']}/stat") as f:  # a zombie is dead enough; anything else is a leak
            if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                alive.append(pod["name"])
    return alive


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, object], int]:
    runs = tmp_path_factory.mktemp("ref")
    done = run_ait(runs, "train", "--config", str(SMOKE), "--run-id", "ref")
    assert done.returncode == 0, done.stderr[-3000:]
    digest, data = trained_digest(runs / "ref")
    assert duplicates(runs / "ref") == []
    return digest, data, _events(runs / "ref")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_killed_and_resumed_run_ends_like_an_uninterrupted_one(
    tmp_path: Path, seed: int, reference: tuple[str, dict[str, object], int]
) -> None:
    ref_digest, ref_data, ref_events = reference
    rng = random.Random(seed)
    run = tmp_path / "crash"
    kills = 0
    first = True
    for _ in range(4):  # up to four kills, anywhere from the header to the final drain
        at = _events(run) + rng.randrange(1, max(2, ref_events // 3))
        args = ["train", "--config", str(SMOKE), "--run-id", "crash"] if first else ["resume", "crash"]
        first = False
        proc = run_ait(tmp_path, *args, kill_after=at)
        if proc.returncode == 0:
            break  # it finished before reaching the kill point
        assert proc.returncode == -9, (at, proc.returncode, proc.stderr[-3000:])
        kills += 1
    else:
        proc = run_ait(tmp_path, "resume", "crash")
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert kills >= 1, "no kill landed: the kill points are drawn too late"
    digest, data = trained_digest(run)
    assert data == ref_data and digest == ref_digest, f"seed {seed}: {kills} kill(s)"
    assert duplicates(run) == [], f"seed {seed}"
    assert _no_live_pods(tmp_path) == []
