"""The process ``test_multi_job_crash`` kills with SIGKILL: a multi-job episode whose two jobs stay in flight.

``python -m tests.handlers.episode.multi_job_child RUN_DIR WORKSPACE``: submits job-1, then job-2 (a lower
learning rate), then waits for both; the fake job runner holds them in training forever, so the process is
sure to die with both jobs queued, started and unfinished, inside ``wait_for_jobs``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec

from adapters.agents.scripted import ScriptedPolicy, Trajectory
from engine.blobs import BlobStore
from engine.runtime import Runtime
from families.spec import load_spec
from handlers.episode.projection import EpisodesProjection
from handlers.episode.runner import EpisodeRunner, EpisodeSetup
from handlers.reward.baseline_projection import BaselinesProjection
from handlers.reward.formula import RewardConfig
from handlers.reward.projection import RewardsProjection
from handlers.reward.reactor import RewardReactor
from tests.fakes import MINIMAL_JOB_TOML, FakeValidator
from tests.fakes.jobs import FakeJobs

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "examples" / "tasks" / "multi" / "calc_chain_v1_fast_multi.json"
EP = "ep-0"
OUTCOMES = {f"{EP}-job-1": (0.3, 0.1, 0.2, 0.05), f"{EP}-job-2": (0.3, 0.45, 0.2, 0.4)}


def projections() -> list[Any]:
    return [EpisodesProjection(), RewardsProjection(), BaselinesProjection()]


def trajectory() -> Trajectory:
    turns: list[list[tuple[str, dict[str, Any]]]] = [
        [("write_file", {"path": "job.toml", "content": MINIMAL_JOB_TOML}), ("submit_job", {})],
        [("edit_file", {"path": "job.toml", "old_text": "1e-5", "new_text": "3e-6"}), ("submit_job", {})],
        [("wait_for_jobs", {})],
        [("job_result", {"job_id": "job-1"}), ("job_result", {"job_id": "job-2"})],
        [("finish", {"final_job_id": "job-2"})],
    ]
    doc = {
        "name": "two-in-flight",
        "family": "calc_chain",
        "turns": [{"tool_calls": [{"name": n, "arguments": a} for n, a in calls]} for calls in turns],
    }
    return msgspec.convert(doc, Trajectory)


def setup(workspace: Path) -> EpisodeSetup:
    return EpisodeSetup(
        episode_id=EP,
        task_id="calc_chain_v1_fast_multi/0",
        spec=load_spec(SPEC),
        spec_json=SPEC.read_bytes(),
        workspace=workspace,
        initial_files={"INSTRUCTIONS.md": b"# do it\n"},
        messages=[{"role": "system", "content": "you are a trainer"}, {"role": "user", "content": "teach calc"}],
        baselines={"Qwen/Qwen3-0.6B": 0.3},
        max_turns=10,
        wait_cap_s=600.0,
    )


async def main(run: Path, workspace: Path) -> None:
    from events import BaselineFrozen

    async with Runtime(run, projections()) as rt:
        rt.start_reactor(RewardReactor(RewardConfig()))
        rt.start_reactor(FakeJobs(OUTCOMES, hold=anyio.Event()))  # never set: the jobs never finish here
        await rt.emit(BaselineFrozen(family="calc_chain", model="Qwen/Qwen3-0.6B", score=0.3, n=200))
        await EpisodeRunner(rt, BlobStore(run / "blobs"), ScriptedPolicy(trajectory()), FakeValidator()).run(
            setup(workspace)
        )


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), Path(sys.argv[2]))
