"""Fault tests with local pods: real ``ait worker`` and ``ait pod-agent`` processes, killed at bad moments.

- a pod agent killed mid-job: the job is requeued and finishes exactly once;
- the controller SIGKILLed mid-dispatch and started again: no job lost, none run twice, no pod left running;
- the first rung of the GPU ladder out of stock: the next rung is used;
- the budget cap reached: no pod is launched, and the log and the exit status say why.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.local_provider import LocalProvider
from adapters.pod.client import HttpPodAgent
from adapters.pod.tokens import PodTokens
from cli.worker_wiring import POD_AGENT_COMMAND
from engine.blobs import BlobStore
from engine.log import read_log
from engine.runtime import Runtime
from events import (
    BudgetSet,
    CostRefused,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
)
from handlers.budget.prices import load_prices
from handlers.budget.rules import BudgetGate
from handlers.fleet.context import Ports
from handlers.fleet.dispatcher import Dispatcher
from handlers.fleet.policy import FleetConfig
from handlers.fleet.projection import FleetProjection
from handlers.ports.provider import PodState, run_prefix
from tests.fakes.fleet import StockOutProvider
from tests.handlers.fleet.fleet_world import projections, queue_jobs, spec

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
FAKE = "tests.fakes.inner:make_trainer"


def seed(runs: Path, run_id: str, jobs: int, *, run_usd: float | None = None) -> None:
    async def main() -> None:
        async with Runtime(runs / run_id, projections(), run_id=run_id) as rt:
            if run_usd is not None:
                await rt.emit(BudgetSet(run_usd=run_usd))
            await queue_jobs(rt, BlobStore(runs / run_id / "blobs"), jobs)

    anyio.run(main)


def worker(runs: Path, run_id: str, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "cli", "--runs-root", str(runs), "worker", run_id, "--provider", "local"]
    return subprocess.Popen(
        [*argv, "--once", "--tick", "0.05", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def events(runs: Path, run_id: str) -> list[Any]:
    path = runs / run_id / "events.jsonl"
    return [r.event for r in read_log(path).records] if path.exists() else []


def wait_for(runs: Path, run_id: str, what: type, n: int = 1, timeout: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in events(runs, run_id) if isinstance(e, what)]
        if len(found) >= n:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {what.__name__} within {timeout} s")


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def pod_records(runs: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((runs / ".local-pods").glob("*/pod.json"))]


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def assert_no_pod_left(runs: Path, run_id: str) -> None:
    records = pod_records(runs)
    assert records, "no pod was ever started"
    assert [r["pid"] for r in records if pid_alive(r["pid"])] == []
    listed = anyio.run(LocalProvider(POD_AGENT_COMMAND, runs / ".local-pods").list_pods, run_prefix(run_id))
    assert {p.state for p in listed} == {PodState.GONE}


def runs_per_job(runs: Path) -> Counter[str]:
    """What the pod agents' own journals say they started, across every pod."""
    started: Counter[str] = Counter()
    for journal in (runs / ".local-pods").glob("*/work/runs.jsonl"):
        for line in journal.read_text().splitlines():
            started[json.loads(line)["job_id"]] += 1
    return started


def test_a_pod_agent_killed_mid_job_requeues_the_job_which_finishes_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    seed(runs, "r1", 2)
    proc = worker(runs, "r1", "--max-pods", "2", "--trainer", FAKE, "--trainer-opt", "seconds=1.2")
    try:
        victim = wait_for(runs, "r1", JobStarted)[0]
        ready = next(e for e in events(runs, "r1") if isinstance(e, PodReady) and e.pod_id == victim.pod_id)
        record = next(r for r in pod_records(runs) if r["provider_id"] == ready.provider_id)
        os.killpg(record["pid"], signal.SIGKILL)
        code, out = finish(proc)
    finally:
        proc.kill()
    assert code == 0, out
    evs = events(runs, "r1")
    requeued = [e for e in evs if isinstance(e, JobRequeued)]
    assert [(e.job_id, e.attempt) for e in requeued] == [(victim.job_id, 1)]
    assert [e.pod_id for e in evs if isinstance(e, PodLost)] == [victim.pod_id]
    assert Counter(e.job_id for e in evs if isinstance(e, JobSucceeded)) == {"j0": 1, "j1": 1}
    assert runs_per_job(runs)[victim.job_id] == 2  # the killed run, then the one that finished
    assert "drained: 2 succeeded, 0 failed" in out
    assert_no_pod_left(runs, "r1")


@pytest.mark.parametrize("moment", [PodRequested, JobStarted], ids=["launching", "running"])
def test_a_controller_killed_mid_dispatch_resumes_without_losing_or_repeating_a_job(
    tmp_path: Path, moment: type
) -> None:
    runs = tmp_path / "runs"
    seed(runs, "r2", 3)
    first = worker(runs, "r2", "--max-pods", "2", "--trainer", FAKE, "--trainer-opt", "seconds=1.2")
    try:
        wait_for(runs, "r2", moment)
    finally:
        first.send_signal(signal.SIGKILL)  # no cleanup of any kind
        first.communicate(timeout=10)
    if moment is JobStarted:
        live = [r["pid"] for r in pod_records(runs) if pid_alive(r["pid"])]
        assert live, "the pods should outlive their controller"

    second = worker(runs, "r2", "--max-pods", "2", "--trainer", FAKE, "--trainer-opt", "seconds=1.2")
    try:
        code, out = finish(second)
    finally:
        second.kill()
    assert code == 0, out
    evs = events(runs, "r2")
    assert Counter(e.job_id for e in evs if isinstance(e, JobSucceeded)) == {"j0": 1, "j1": 1, "j2": 1}
    assert [e for e in evs if isinstance(e, JobRequeued)] == []  # the running jobs were reconciled, not redone
    assert runs_per_job(runs) == {"j0": 1, "j1": 1, "j2": 1}  # no job ran twice on any pod
    requested = [e for e in evs if isinstance(e, PodRequested)]
    if moment is JobStarted:
        assert len(requested) == 2  # the surviving pods were adopted
    else:
        # Killed just after a pod request was recorded: the pod may not have been created yet (it depends on where
        # the kill lands), and then the next controller requests another. At most one replacement per request.
        assert 2 <= len(requested) <= 4, requested
    assert_no_pod_left(runs, "r2")


async def test_stock_out_on_the_first_rung_uses_the_next_with_local_pods(tmp_path: Path) -> None:
    ladder = ("NVIDIA RTX A5000", "NVIDIA A40")
    local = LocalProvider(
        POD_AGENT_COMMAND, tmp_path / "pods", trainer="standin", trainer_options={"steps": "2", "step_s": "0.05"}
    )
    provider = StockOutProvider(local, out={"NVIDIA RTX A5000"})
    config = FleetConfig(max_pods=1, ladder=ladder, tick_s=0.05, ready_timeout_s=30.0)
    async with HttpPodAgent() as agent, Runtime(tmp_path / "r3", projections(), run_id="r3") as rt:
        await queue_jobs(rt, BlobStore(tmp_path / "r3" / "blobs"), 1)
        ports = Ports(
            provider=provider,
            agent=agent,
            gate=BudgetGate.for_runtime(rt, load_prices()),
            blobs=BlobStore(tmp_path / "r3" / "blobs"),
            tokens=PodTokens(tmp_path / "r3" / "secrets" / "key"),
            spec_for=spec,
        )
        summary = await Dispatcher(rt, ports, config, once=True).run()
        fleet = rt.state(FleetProjection)
    assert summary.succeeded == 1
    evs = [r.event for r in read_log(tmp_path / "r3" / "events.jsonl").records]
    assert [(e.kind, e.gpu_type) for e in evs if isinstance(e, PodProvisionFailed)] == [("stock_out", ladder[0])]
    assert [e.gpu_type for e in evs if isinstance(e, PodReady)] == [ladder[1]]
    assert provider.refused == [ladder[0]]
    assert [p.gpu_type for p in fleet.pods.values() if p.ready_ts] == [ladder[1]]
    assert {p.state for p in await local.list_pods(run_prefix("r3"))} == {PodState.GONE}


def test_the_budget_cap_launches_no_pod_and_says_why(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    seed(runs, "r4", 2, run_usd=0.10)  # an A40's first reserved hour costs $0.49
    code, out = finish(worker(runs, "r4", "--ladder", "NVIDIA A40"))
    assert code == 3, out
    assert "budget" in out and "2 waiting" in out
    refused = [e for e in events(runs, "r4") if isinstance(e, CostRefused)]
    assert len(refused) == 1 and refused[0].budget == "run" and "run budget refused" in refused[0].message
    assert not [e for e in events(runs, "r4") if isinstance(e, PodRequested)]
    assert not (runs / ".local-pods").exists() or pod_records(runs) == []
