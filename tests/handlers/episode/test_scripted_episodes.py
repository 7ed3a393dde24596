"""Scripted episodes for every family with a good trajectory (the five training ones and the held-out triage),
end to end on the episode runner with the real template.

Each episode starts from ``handlers.episode.setup.template_files`` (the rendered ``template/``, dev examples and
spec), replays a committed trajectory from ``fixtures/trajectories/`` with the scripted policy, and is
validated by the real sandboxed probe (``adapters.probe.ProbeValidator``, verifiers 0.4.0; slow) and, for a
fast check of the runner and the log alone, by ``tests.fakes.FakeValidator``. A good trajectory reaches a
validated submission on its first attempt; ``calc_chain_retry`` is rejected twice (learning rate out of
bounds, then the ``div`` tool missing) and then validated. Replaying the log rebuilds the workspace byte for
byte (``materialise``), and the validated bundle holds exactly the workspace the agent left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.agents.scripted import ScriptedPolicy, load_trajectory
from adapters.probe import ProbeValidator
from engine.blobs import BlobStore
from engine.log import read_log
from engine.replay import replay
from engine.runtime import Runtime
from families.spec import load_spec
from fixtures.trajectories.build import FAMILIES, fixture_files
from handlers.episode.bundle import unpack_bundle
from handlers.episode.materialise import materialise
from handlers.episode.projection import EpisodesProjection
from handlers.episode.runner import EpisodeOutcome, EpisodeRunner, EpisodeSetup
from handlers.episode.setup import env_id_for, opening_messages, template_files
from handlers.episode.workspace import Workspace
from handlers.ports.validator import Validator
from tests.fakes import FakeValidator

ROOT = Path(__file__).resolve().parents[3]
TRAJECTORIES = ROOT / "fixtures" / "trajectories"
BASELINES = {"Qwen/Qwen3-0.6B": 0.21, "Qwen/Qwen3-1.7B": 0.34}


def _setup(tmp_path: Path, family: str) -> EpisodeSetup:
    spec_path = ROOT / "examples" / "tasks" / f"{family}_v1_fast.json"
    spec = load_spec(spec_path)
    files = template_files(spec)
    return EpisodeSetup(
        episode_id=f"ep-{family}",
        task_id=f"{family}/dev/0",
        spec=spec,
        spec_json=spec_path.read_bytes(),
        workspace=tmp_path / "ws",
        initial_files=files,
        messages=opening_messages(spec, files),
        baselines=BASELINES,
    )


async def _episode(tmp_path: Path, family: str, trajectory: str, validator: Validator) -> tuple[EpisodeOutcome, Any]:
    setup = _setup(tmp_path, family)
    run = tmp_path / "run"
    policy = ScriptedPolicy(load_trajectory(TRAJECTORIES / f"{trajectory}.json"))
    async with Runtime(run, [EpisodesProjection()]) as rt:
        out = await EpisodeRunner(rt, BlobStore(run / "blobs"), policy, validator).run(setup)
        live_hash = rt.state_hash()
    return out, (setup, run, live_hash)


def _submissions(run: Path) -> list[Any]:
    return [r.event for r in read_log(run / "events.jsonl").records if r.event.type.startswith("submission.")]


def _check_log_rebuilds_workspace(tmp_path: Path, family: str, ctx: Any, out: EpisodeOutcome) -> None:
    setup, run, live_hash = ctx
    live = Workspace(setup.workspace).snapshot()
    # The agent left exactly the fixture env and job.toml (the trajectory is built from them).
    fixture = {p: t.encode() for p, t in fixture_files(family).items()}
    assert {p: live[p] for p in fixture} == fixture
    # The log alone rebuilds the workspace, byte for byte, and the same projection state.
    result = replay(run / "events.jsonl", [EpisodesProjection()])
    assert result.state_hash == live_hash
    episode = result.states["episodes"][setup.episode_id]
    assert episode.status == "validated"
    dest = tmp_path / "rebuilt"
    materialise(episode, BlobStore(run / "blobs"), dest)
    assert Workspace(dest).snapshot() == live
    # The validated bundle is that workspace plus the task spec.
    unpacked = tmp_path / "bundle"
    unpack_bundle(BlobStore(run / "blobs").get(out.bundle), unpacked)
    assert Workspace(unpacked).snapshot() == {**live, "task_spec.json": setup.spec_json}


async def _good(tmp_path: Path, family: str, validator: Validator) -> list[Any]:
    out, ctx = await _episode(tmp_path, family, f"{family}_good", validator)
    assert (out.status, out.attempts) == ("validated", 1)
    assert out.job is not None and out.job.env.id == env_id_for(ctx[0].spec)
    _check_log_rebuilds_workspace(tmp_path, family, ctx, out)
    subs = _submissions(ctx[1])
    assert [s.type for s in subs] == ["submission.received", "submission.validated"]
    return subs


@pytest.mark.parametrize("family", FAMILIES)
async def test_good_episode_with_the_fake_validator(tmp_path: Path, family: str) -> None:
    await _good(tmp_path, family, FakeValidator())


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", FAMILIES)
async def test_good_episode_is_validated_by_the_probe_first_try(tmp_path: Path, family: str) -> None:
    subs = await _good(tmp_path, family, ProbeValidator())
    checks = {c.name: c for c in subs[-1].checks}
    assert all(c.ok for c in checks.values()), {n: c.detail for n, c in checks.items() if not c.ok}
    assert "none equals a hidden eval item" in checks["tasks"].detail
    assert "0 for wrong ones" in checks["rubric"].detail and "with the reference tool calls" in checks["rubric"].detail


async def _retry(tmp_path: Path, validator: Validator) -> list[Any]:
    out, ctx = await _episode(tmp_path, "calc_chain", "calc_chain_retry", validator)
    assert (out.status, out.attempts) == ("validated", 3)
    _check_log_rebuilds_workspace(tmp_path, "calc_chain", ctx, out)
    subs = _submissions(ctx[1])
    assert [(s.type, s.attempt) for s in subs] == [
        ("submission.received", 1),
        ("submission.rejected", 1),
        ("submission.received", 2),
        ("submission.rejected", 2),
        ("submission.received", 3),
        ("submission.validated", 3),
    ]
    return subs


async def test_retry_episode_event_sequence_with_the_fake_validator(tmp_path: Path) -> None:
    await _retry(tmp_path, FakeValidator(accept_from=3))


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_retry_episode_is_rejected_twice_by_the_probe_then_validated(tmp_path: Path) -> None:
    subs = await _retry(tmp_path, ProbeValidator())
    first, second, third = ({c.name: c for c in s.checks} for s in subs[1::2])
    assert not first["job_config"].ok and "learning_rate" in first["job_config"].detail
    assert second["job_config"].ok
    assert not second["tools"].ok and "missing tool(s) ['div']" in second["tools"].detail
    assert [n for n, c in second.items() if not c.ok] == ["tools"]
    assert all(c.ok for c in third.values())
