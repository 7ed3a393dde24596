"""Multi-job episodes on the episode runner: submit, read the results, revise, finish; the reward from the final job.

The scripted ``calc_chain_two_jobs`` trajectory runs on the multi-job calc_chain spec with the fake validator and
``tests.fakes.jobs.FakeJobs`` standing in for the fleet (hidden pre/post and dev scores chosen here, distinctive
so a leak into any tool result is visible). Checks: the event sequence and the job chain, the agent-facing texts,
the reward (final job's quality, speed over both jobs), a replay rebuilding the same state, hostile tool calls.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.agents.scripted import ScriptedPolicy, Trajectory, load_trajectory
from engine.blobs import BlobStore
from engine.log import read_log
from engine.replay import replay
from engine.runtime import Runtime
from events import BaselineFrozen, EpisodeJobSubmitted, JobQueued, RewardComputed, ToolReturned
from families.spec import load_spec
from handlers.episode.projection import EpisodesProjection
from handlers.episode.runner import EpisodeOutcome, EpisodeRunner, EpisodeSetup
from handlers.episode.setup import opening_messages, template_files
from handlers.episode.tools import MULTI_TOOL_SCHEMAS, TOOL_SCHEMAS
from handlers.reward.baseline_projection import BaselinesProjection
from handlers.reward.formula import RewardConfig
from handlers.reward.projection import RewardsProjection
from handlers.reward.reactor import RewardReactor
from tests.fakes import FakeValidator
from tests.fakes.jobs import FakeJobs

ROOT = Path(__file__).resolve().parents[3]
MULTI_SPEC = ROOT / "examples" / "tasks" / "multi" / "calc_chain_v1_fast_multi.json"
TWO_JOBS = ROOT / "fixtures" / "trajectories" / "calc_chain_two_jobs.json"
EP = "ep-0"
# hidden pre, hidden post, dev pre, dev post: the hidden figures are odd enough to be found if they leaked
OUTCOMES = {f"{EP}-job-1": (0.4375, 0.3819, 0.25, 0.125), f"{EP}-job-2": (0.4375, 0.6931, 0.25, 0.5)}
HIDDEN_TEXTS = ("0.4375", "0.438", "0.3819", "0.382", "0.6931", "0.693")


def projections() -> list[Any]:
    return [EpisodesProjection(), RewardsProjection(), BaselinesProjection()]


def _setup(tmp_path: Path, spec_path: Path = MULTI_SPEC) -> EpisodeSetup:
    spec = load_spec(spec_path)
    files = template_files(spec)
    return EpisodeSetup(
        episode_id=EP,
        task_id=f"{spec.name}/0",
        spec=spec,
        spec_json=spec_path.read_bytes(),
        workspace=tmp_path / "ws",
        initial_files=files,
        messages=opening_messages(spec, files),
        baselines={"Qwen/Qwen3-1.7B": 0.4},
        wait_cap_s=30.0,
    )


async def _run(
    tmp_path: Path, trajectory: Trajectory, jobs: FakeJobs, setup: EpisodeSetup | None = None
) -> tuple[EpisodeOutcome, Path, str]:
    run = tmp_path / "run"
    setup = setup or _setup(tmp_path)
    async with Runtime(run, projections()) as rt:
        rt.start_reactor(RewardReactor(RewardConfig()))
        rt.start_reactor(jobs)
        await rt.emit(BaselineFrozen(family="calc_chain", model="Qwen/Qwen3-1.7B", score=0.4, n=200))
        out = await EpisodeRunner(rt, BlobStore(run / "blobs"), ScriptedPolicy(trajectory), FakeValidator()).run(setup)
        with anyio.fail_after(20):
            await rt.wait_until(lambda: EP in rt.state(RewardsProjection))
        live = rt.state_hash()
    return out, run, live


def _events(run: Path) -> list[Any]:
    return [r.event for r in read_log(run / "events.jsonl").records]


def _tool_texts(events: list[Any]) -> list[str]:
    return [e.content for e in events if isinstance(e, ToolReturned)]


def test_one_shot_specs_keep_todays_tools() -> None:
    names = [t["function"]["name"] for t in TOOL_SCHEMAS]
    assert names == ["read_file", "write_file", "edit_file", "list_files", "get_baseline_scores", "submit_job"]
    multi = [t["function"]["name"] for t in MULTI_TOOL_SCHEMAS]
    assert set(multi) - set(names) == {"job_status", "job_result", "wait_for_jobs", "finish"}


async def test_two_jobs_the_second_fixing_the_first(tmp_path: Path) -> None:
    jobs = FakeJobs(OUTCOMES)
    out, run, live = await _run(tmp_path, load_trajectory(TWO_JOBS), jobs)
    assert (out.status, out.final_job, out.jobs) == ("finished", f"{EP}-job-2", [f"{EP}-job-1", f"{EP}-job-2"])
    events = _events(run)
    submitted = [e for e in events if isinstance(e, EpisodeJobSubmitted)]
    assert [(s.job_id, s.index, s.parent_job_id) for s in submitted] == [
        (f"{EP}-job-1", 1, ""),
        (f"{EP}-job-2", 2, f"{EP}-job-1"),
    ]
    assert [e.job_id for e in events if isinstance(e, JobQueued)] == [s.job_id for s in submitted]
    assert "learning_rate = 1e-4" in _bundle_job_toml(run, submitted[0].bundle)
    assert "learning_rate = 1e-5" in _bundle_job_toml(run, submitted[1].bundle)  # the fixture's own rate
    texts = _tool_texts(events)
    assert any("queued as job-1" in t for t in texts) and any("queued as job-2" in t for t in texts)
    assert any("dev-split score: before training 0.250, after training 0.125" in t for t in texts)
    assert any("dev-split score: before training 0.250, after training 0.500" in t for t in texts)
    assert not [t for t in texts for h in HIDDEN_TEXTS if h in t]  # no hidden score reached the agent
    (reward,) = [e for e in events if isinstance(e, RewardComputed)]
    assert (reward.job_id, reward.post, reward.best_pre) == (f"{EP}-job-2", 0.6931, 0.4)
    assert reward.outcome == "scored" and reward.validation == 1.0
    assert reward.train_seconds == 80.0 and reward.time_budget_s == 600.0  # speed counts both jobs
    # The log alone rebuilds the same state (jobs, curves, final job, reward).
    assert replay(run / "events.jsonl", projections()).state_hash == live


def _bundle_job_toml(run: Path, blob: str) -> str:
    from handlers.episode.bundle import bundle_files

    return bundle_files(BlobStore(run / "blobs").get(blob))["job.toml"].decode()


def _hostile(calls: list[tuple[str, dict[str, Any]]]) -> Trajectory:
    good = json.loads(TWO_JOBS.read_text())
    head = good["turns"][:7]  # explore, write the env and job.toml, submit job-1, wait for it
    turns = head + [{"content": "probing", "tool_calls": [{"name": name, "arguments": args}]} for name, args in calls]
    turns.append({"content": "done", "tool_calls": [{"name": "finish", "arguments": {"final_job_id": "job-1"}}]})
    return load_trajectory_from(tmp_doc={**good, "name": "hostile", "turns": turns})


def load_trajectory_from(tmp_doc: dict[str, Any]) -> Trajectory:
    import msgspec

    return msgspec.convert(tmp_doc, Trajectory)


async def test_hostile_calls_never_reach_the_hidden_score(tmp_path: Path) -> None:
    """Every route through the new tools to a hidden score: run-wide ids, another episode's job, path tricks,
    wrong types, reading the result off the workspace. All answered without a hidden figure."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("job_result", {"job_id": f"{EP}-job-1"}),  # the run-wide id
        ("job_status", {"job_id": "ep-other-job-1"}),  # another episode's job
        ("job_result", {"job_id": "job-1/../../pre"}),
        ("job_result", {"job_id": "job-1", "show": "hidden"}),  # an argument that does not exist
        ("job_status", {"job_id": "job-1"}),  # carries the recent *training* reward only
        ("job_result", {"job_id": "job-1"}),
        ("wait_for_jobs", {"job_ids": ["job-1", "ep-other-job-1"]}),
        ("wait_for_jobs", {"job_ids": "job-1"}),
        ("read_file", {"path": "../run/events.jsonl"}),
        ("list_files", {"directory": ".."}),
        ("finish", {"final_job_id": "ep-other-job-1"}),
    ]
    jobs = FakeJobs({**OUTCOMES, "ep-other-job-1": (0.4375, 0.6931, 0.0, 0.0)})
    out, run, _ = await _run(tmp_path, _hostile(calls), jobs)
    events = _events(run)
    texts = _tool_texts(events)
    # The targets are there: the job really has hidden scores, recorded in the log for the reward.
    (reward,) = [e for e in events if isinstance(e, RewardComputed)]
    assert (reward.job_id, reward.post) == (f"{EP}-job-1", 0.3819)
    assert not [t for t in texts for h in HIDDEN_TEXTS if h in t]
    probe = texts[-len(calls) - 1 : -1]
    assert probe[0].startswith("error: no job") and probe[1].startswith("error: no job")
    assert probe[2].startswith("error: no job") and "has no argument 'show'" in probe[3]
    assert probe[4].startswith("job-1: succeeded") and "recent training reward: 0.100, 0.200, 0.300" in probe[4]
    assert "dev-split score" in probe[5]
    assert probe[6].startswith("error: no job") and "must be a array" in probe[7]
    assert probe[8].startswith("error") and probe[9].startswith("error")
    assert probe[10].startswith("error: no job")
    assert out.final_job == f"{EP}-job-1"


async def test_budget_refuses_a_job_past_the_money_budget(tmp_path: Path) -> None:
    """Jobs priced so the budget ($1) holds one job's worst case ($0.95) plus little: job-1 settles at its real
    60 s ($0.095), so job-2's worst case no longer fits and it is refused before it is probed."""
    setup = dataclasses.replace(_setup(tmp_path), job_usd_per_s=0.95 / 600)
    out, run, _ = await _run(tmp_path, load_trajectory(TWO_JOBS), FakeJobs(OUTCOMES), setup)
    events = _events(run)
    assert [e.job_id for e in events if isinstance(e, EpisodeJobSubmitted)] == [f"{EP}-job-1"]
    assert [e.reserve_usd for e in events if isinstance(e, EpisodeJobSubmitted)] == [pytest.approx(0.95)]
    assert any("job budget is $1.0000" in t for t in _tool_texts(events))
    assert len([e for e in events if type(e).__name__ == "SubmissionReceived"]) == 1  # refused before the probe
    # finish(job-2) named no job of its own; then the script ran out (a policy error): no valid final job
    assert out.status == "error" and out.final_job == ""
    (reward,) = [e for e in events if isinstance(e, RewardComputed)]
    assert (reward.outcome, reward.reward) == ("not_validated", 0.0)


@pytest.mark.parametrize("job_ids", [["job-1"], []])
def test_wait_argument_shapes_parse(job_ids: list[str]) -> None:
    from handlers.episode.tools import parse_arguments
    from handlers.ports.policy import ToolCall

    args = parse_arguments(
        ToolCall(id="c", name="wait_for_jobs", arguments=json.dumps({"job_ids": job_ids})), multi=True
    )
    assert args["job_ids"] == job_ids
