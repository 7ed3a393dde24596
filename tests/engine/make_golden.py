"""Write the spine's golden log, fixtures/golden/spine/events.jsonl, through the real Runtime.

Run from the repository root: ``.venv/bin/python -m tests.engine.make_golden``. The output is committed;
test_golden.py replays it and checks a recorded state hash. Regenerate only when the line format changes
on purpose (then update the hash in test_golden.py and say why in the commit): an old golden log that no
longer replays is exactly what this fixture exists to catch.

The scenario is fixed (no randomness) and the clock is manual, so the file is reproducible byte for byte.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import anyio

from engine.clock import ManualClock
from engine.runtime import Runtime
from events import (
    CostReserved,
    CostSettled,
    EventBody,
    JobAssigned,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    PodIdle,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodTerminated,
    RunFinished,
    RunStarted,
)

RUN_ID = "golden-spine"
OUT = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "spine" / "events.jsonl"
BUNDLE = "5" * 64


def scenario() -> list[EventBody]:
    """Two jobs on a small fleet: one succeeds, one fails, is requeued and succeeds; one pod request fails
    and one stays unanswered (a pending request). Money is reserved and settled throughout."""
    key = (RUN_ID + ":{}").format
    return [
        RunStarted(run_id=RUN_ID, seed=1234, code_version="golden", config={"pods": 2, "budget_usd": 5.0}),
        JobQueued(job_id="job-a", episode_id="ep-1", family="calc_chain", base_model="tiny", bundle=BUNDLE),
        JobQueued(job_id="job-b", episode_id="ep-2", family="ledger", base_model="tiny", bundle=BUNDLE),
        CostReserved(reservation_id="res-1", kind="job", ref="job-a", usd=0.75, episode_id="ep-1"),
        PodRequested(pod_id="pod-1", gpu_type="H100", provider="local"),  # seq 4
        PodRequested(pod_id="pod-2", gpu_type="H100", provider="local"),  # seq 5
        PodReady(key=key(4), pod_id="pod-1", provider_id="local-1", url="http://127.0.0.1:9001"),
        PodProvisionFailed(key=key(5), pod_id="pod-2", kind="stock_out", detail="no H100 left"),
        JobAssigned(job_id="job-a", pod_id="pod-1"),
        JobStarted(job_id="job-a", pod_id="pod-1"),
        JobProgressed(job_id="job-a", step=1, reward=0.25, loss=1.5),
        JobProgressed(job_id="job-a", step=2, reward=0.5, loss=1.25),
        JobSucceeded(job_id="job-a", pre=0.2, post=0.55, train_seconds=42.5, timings={"train": 40.0, "eval": 2.5}),
        CostSettled(reservation_id="res-1", kind="job", ref="job-a", usd=0.62, item="H100", seconds=42.5),
        PodIdle(pod_id="pod-1"),
        CostReserved(reservation_id="res-2", kind="job", ref="job-b", usd=0.75, episode_id="ep-2"),
        JobAssigned(job_id="job-b", pod_id="pod-1"),
        JobStarted(job_id="job-b", pod_id="pod-1"),
        JobFailed(job_id="job-b", reason="oom", detail="CUDA out of memory"),
        CostSettled(reservation_id="res-2", kind="job", ref="job-b", usd=0.125, item="H100", seconds=8.0),
        JobRequeued(job_id="job-b", reason="oom", attempt=2),
        CostReserved(reservation_id="res-3", kind="job", ref="job-b", usd=0.75, episode_id="ep-2"),
        JobAssigned(job_id="job-b", pod_id="pod-1", attempt=2),
        JobStarted(job_id="job-b", pod_id="pod-1"),
        JobSucceeded(job_id="job-b", pre=0.1, post=0.3, train_seconds=30.0),
        CostSettled(reservation_id="res-3", kind="job", ref="job-b", usd=0.5, item="H100", seconds=30.0),
        PodRequested(pod_id="pod-3", gpu_type="A100", provider="local"),  # never answered: pending
        PodTerminated(pod_id="pod-1", reason="queue empty"),
        RunFinished(status="ok"),
    ]


async def write(directory: Path) -> None:
    async with Runtime(directory, [], run_id=RUN_ID, clock=ManualClock(start=1_764_460_800.0, step=0.5)) as rt:
        for body in scenario():
            await rt.emit(body)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(write, Path(tmp))
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / "events.jsonl", OUT)
    print(f"wrote {OUT} ({len(OUT.read_bytes().splitlines())} events)")


if __name__ == "__main__":
    main()
