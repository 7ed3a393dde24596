"""Episodes on the spine: refused tool calls are recorded and the episode goes on; the log rebuilds the workspace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from adapters.agents.scripted import ScriptedPolicy, Trajectory
from engine.blobs import BlobStore
from engine.replay import replay
from engine.runtime import Runtime
from families.spec import load_spec
from handlers.budget.prices import load_prices
from handlers.budget.rules import BudgetConfig, BudgetGate, BudgetProjection, budget_set
from handlers.episode.materialise import materialise
from handlers.episode.projection import EpisodesProjection
from handlers.episode.runner import EpisodeRunner, EpisodeSetup
from handlers.episode.workspace import MAX_FILE_BYTES
from tests.fakes import CALC_SPEC_PATH, MINIMAL_JOB_TOML, FakeValidator


def _turns(*turns: list[tuple[str, Any]]) -> Trajectory:
    return msgspec.convert(
        {
            "name": "t",
            "family": "calc_chain",
            "turns": [{"tool_calls": [{"name": n, "arguments": a} for n, a in calls]} for calls in turns],
        },
        Trajectory,
    )


def _setup(tmp_path: Path, ep: str = "ep-1") -> EpisodeSetup:
    spec = load_spec(CALC_SPEC_PATH)
    return EpisodeSetup(
        episode_id=ep,
        task_id="calc_chain/dev/0",
        spec=spec,
        spec_json=CALC_SPEC_PATH.read_bytes(),
        workspace=tmp_path / "ws" / ep,
        initial_files={"INSTRUCTIONS.md": b"# do it\n"},
        messages=[{"role": "system", "content": "you are a trainer"}, {"role": "user", "content": "teach calc"}],
        baselines={"Qwen/Qwen3-0.6B": 0.5, "Qwen/Qwen3-1.7B": 0.7},
        max_turns=12,
    )


async def _run(tmp_path: Path, traj: Trajectory, validator: FakeValidator, **kw: Any) -> tuple[Any, Runtime]:
    run = tmp_path / "run"
    async with Runtime(run, [EpisodesProjection()]) as rt:
        runner = EpisodeRunner(rt, BlobStore(run / "blobs"), ScriptedPolicy(traj), validator, **kw)
        out = await runner.run(_setup(tmp_path))
    return out, rt


def test_refused_calls_are_recorded_and_the_episode_goes_on(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    traj = _turns(
        [("write_file", {"path": "../outside.txt", "content": "x"})],
        [("write_file", {"path": str(outside), "content": "x"})],
        [("write_file", {"path": "big.txt", "content": "x" * (MAX_FILE_BYTES + 1)})],
        [("read_file", '{"path": "INSTRUCTIONS.md"')],  # malformed JSON
        [("rm_rf", {})],  # unknown tool
        [("edit_file", {"path": "INSTRUCTIONS.md", "old_text": "nope", "new_text": "x"})],
        [("write_file", {"path": "job.toml", "content": MINIMAL_JOB_TOML})],
        [("read_file", {"path": "job.toml"}), ("get_baseline_scores", {})],
        [("submit_job", {})],
        [("submit_job", {})],
    )
    out, rt = anyio.run(_run, tmp_path, traj, FakeValidator(accept_from=2))
    assert out.status == "validated" and out.attempts == 2 and out.bundle
    assert not outside.exists()
    ep = rt.states["episodes"]["ep-1"]
    assert ep.tool_errors == 7  # six refusals + the first (rejected) submission
    assert ep.status == "validated" and ep.validated_attempt == 2
    events = replay(tmp_path / "run" / "events.jsonl", [EpisodesProjection()])
    assert events.by_type["tool.returned"] == 11
    assert events.by_type["submission.rejected"] == 1 and events.by_type["submission.validated"] == 1


def test_errors_are_readable_by_the_agent(tmp_path: Path) -> None:
    traj = _turns(
        [("write_file", {"path": "../x", "content": "x"})],
        [("read_file", "[1, 2]")],
        [("read_file", {})],
        [("read_file", {"path": 3})],
        [("edit_file", {"path": "INSTRUCTIONS.md", "old_text": "#", "new_text": "x"})],
    )
    anyio.run(_run, tmp_path, traj, FakeValidator())
    from engine.log import read_log

    returned = [r.event for r in read_log(tmp_path / "run" / "events.jsonl").records if r.event.type == "tool.returned"]
    texts = [e.content for e in returned]  # type: ignore[attr-defined]
    assert "leaves the workspace" in texts[0]
    assert "must be a JSON object" in texts[1]
    assert "missing the argument 'path'" in texts[2]
    assert "'path' must be a string" in texts[3]
    assert texts[4].startswith("edited INSTRUCTIONS.md")  # one '#' in the file: a unique match


def test_symlinks_are_refused(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    setup.workspace.mkdir(parents=True)
    os.symlink("/etc", setup.workspace / "etc")
    from handlers.episode.workspace import Workspace, WorkspaceError

    with pytest.raises(WorkspaceError, match="symlink"):
        Workspace(setup.workspace).read("etc/hostname")


def test_workspace_rebuilds_byte_for_byte_from_the_log(tmp_path: Path) -> None:
    traj = _turns(
        [("write_file", {"path": "env/calc_train/__init__.py", "content": "x = 1\n"})],
        [("write_file", {"path": "job.toml", "content": MINIMAL_JOB_TOML})],
        [("edit_file", {"path": "env/calc_train/__init__.py", "old_text": "x = 1", "new_text": "x = 2  # é"})],
        [("submit_job", {})],
    )
    _out, rt = anyio.run(_run, tmp_path, traj, FakeValidator())
    live = {p: (tmp_path / "ws" / "ep-1" / p).read_bytes() for p in ["job.toml", "env/calc_train/__init__.py"]}
    result = replay(tmp_path / "run" / "events.jsonl", [EpisodesProjection()])
    dest = tmp_path / "rebuilt"
    files = materialise(result.states["episodes"]["ep-1"], BlobStore(tmp_path / "run" / "blobs"), dest)
    assert sorted(files) == ["INSTRUCTIONS.md", "env/calc_train/__init__.py", "job.toml"]
    assert {p: (dest / p).read_bytes() for p in live} == live
    assert result.state_hash == rt.state_hash()


def test_an_agent_that_never_submits_ends_with_no_submission(tmp_path: Path) -> None:
    traj = msgspec.convert({"name": "talk", "family": "calc_chain", "turns": [{"content": "hm"}] * 3}, Trajectory)
    out, _ = anyio.run(_run, tmp_path, traj, FakeValidator())
    assert out.status == "no_submission" and out.turns == 2 and not out.parseable


def test_the_budget_ends_an_episode_cleanly(tmp_path: Path) -> None:
    prices = load_prices()
    model = "gpt-4.1-mini"
    run = tmp_path / "run"

    class Priced(ScriptedPolicy):
        pass

    traj = _turns([("list_files", {})], [("list_files", {})])
    policy = Priced(traj)
    policy.model = model

    async def main() -> Any:
        async with Runtime(run, [EpisodesProjection(), BudgetProjection()]) as rt:
            await rt.emit(budget_set(BudgetConfig(episode_usd=0.01), global_spent_before_usd=0.0))
            gate = BudgetGate.for_runtime(rt, prices)
            runner = EpisodeRunner(rt, BlobStore(run / "blobs"), policy, FakeValidator(), gate)
            return await runner.run(_setup(tmp_path))

    out = anyio.run(main)
    assert out.status == "budget_refused"
    result = replay(run / "events.jsonl", [EpisodesProjection()])
    assert result.by_type["cost.refused"] == 1
    assert result.states["episodes"]["ep-1"].status == "budget_refused"
