"""Commit before effect under SIGKILL: a child creating pods is killed between an effect and its next fsync.

Emits are acknowledged in the log's buffer; the provider port waits for durability before each call
(:class:`~handlers.durable_ports.DurableProvider`). The child (tests/engine/effect_child.py) is killed right
after it reports an effect, while the pod's outcome is still in the buffer or the slowed fsync. After each
kill: every pod the provider created has its request in the log (no effect a crash took back: 0 lost
effects, no pod billing unseen), the request of the effect just made is open (its outcome was lost with the
buffer) or answered, and the next run re-issues it with the same key, which the provider finds by name
(0 duplicated pods). The same child without the barrier leaves a pod with no request: the check can fail.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine.log import read_log
from engine.runtime import Runtime
from events import PodRequested, Request
from handlers.ports.provider import pod_name
from tests.engine.effect_child import PROVIDER_FILE, RUN_ID

ROOT = Path(__file__).resolve().parents[2]
CHILD = [sys.executable, "-m", "tests.engine.effect_child"]


def run_and_kill(directory: Path, effects: int, *extra: str) -> list[str]:
    """Start the child, SIGKILL it right after its ``effects``-th EFFECT line; returns the effect keys seen."""
    keys: list[str] = []
    with subprocess.Popen(
        [*CHILD, str(directory), *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for raw in proc.stdout:
            assert time.monotonic() < deadline, "the child hung"
            if raw.startswith(b"EFFECT "):
                keys.append(raw.split()[1].decode())
                if len(keys) >= effects:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
                    break
            else:
                raise AssertionError(f"the child said: {raw.decode(errors='replace')}{proc.stdout.read().decode()}")
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL, f"the child ended on its own ({proc.returncode})"
    return keys


def requests_and_pending(directory: Path) -> tuple[dict[str, str], set[str]]:
    """The log's pod requests (key -> pod name) and the keys still without an outcome (as a resume sees)."""
    records = read_log(directory / "events.jsonl").records
    requests = {r.event.key: pod_name(RUN_ID, r.event.pod_id) for r in records if isinstance(r.event, PodRequested)}
    rt = Runtime(directory, [], run_id=RUN_ID)
    try:
        pending = {r.event.key for r in rt.pending_requests() if isinstance(r.event, Request)}
    finally:
        rt.log.close()
    return requests, pending


def created(directory: Path) -> list[str]:
    path = directory / PROVIDER_FILE
    return path.read_text().split() if path.exists() else []


def test_a_kill_between_an_effect_and_its_fsync_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"effect crash seed {seed}")
    rng = random.Random(seed)
    lost_outcomes = 0  # kills that took an acknowledged outcome with them: the window under test
    for cycle in range(8):
        keys = run_and_kill(tmp_path, rng.choice([1, 2, 5, 12]))
        requests, pending = requests_and_pending(tmp_path)
        pods = created(tmp_path)
        assert len(pods) == len(set(pods)), f"seed {seed} cycle {cycle}: a pod was created twice"
        unseen = set(pods) - set(requests.values())
        assert not unseen, f"seed {seed} cycle {cycle}: pods created for requests the crash took back: {unseen}"
        assert set(keys) <= set(requests), f"seed {seed} cycle {cycle}: an effect ran for an unlogged request"
        lost_outcomes += keys[-1] in pending
    print(f"kills before an outcome fsync: {lost_outcomes} of 8")
    assert lost_outcomes >= 2, f"seed {seed}: only {lost_outcomes} kills landed before an outcome's fsync"
    # A last run that only resumes: every open request is re-issued with its key; the provider finds the pod.
    subprocess.run([*CHILD, str(tmp_path), "--resume-only"], cwd=ROOT, check=True, timeout=60)
    requests, pending = requests_and_pending(tmp_path)
    assert not pending
    pods = created(tmp_path)
    assert sorted(pods) == sorted(requests.values()), "every request has exactly one pod, every pod a request"


def test_without_the_barrier_a_kill_leaves_a_pod_no_request_knows(tmp_path: Path) -> None:
    """The negative control: the same child calling the provider without waiting for durability."""
    for _ in range(5):
        run_and_kill(tmp_path, 1, "--no-barrier")
        requests, _ = requests_and_pending(tmp_path)
        if set(created(tmp_path)) - set(requests.values()):
            return
    raise AssertionError("5 kills without the barrier never left an unlogged pod: the test cannot see the bug")
