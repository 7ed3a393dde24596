"""An episode interrupted at any event continues from its last recorded turn and ends exactly as an
uninterrupted one: same conversation, same workspace, same attempts, no turn or submission counted twice."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from adapters.agents.scripted import ScriptedPolicy, Trajectory
from engine.blobs import BlobStore
from engine.log import read_log
from engine.runtime import Runtime
from families.spec import load_spec
from handlers.episode.projection import EpisodesProjection
from handlers.episode.resume import episode_histories, resume_point
from handlers.episode.runner import EpisodeRunner, EpisodeSetup
from tests.fakes import CALC_SPEC_PATH, MINIMAL_JOB_TOML, FakeValidator

LONG = "x" * 4500 + "\nend\n"  # its read_file result is longer than tool.returned keeps


def _trajectory() -> Trajectory:
    turns: list[list[tuple[str, Any]]] = [
        [("write_file", {"path": "notes.md", "content": "alpha\n"}), ("read_file", {"path": "notes.md"})],
        [("edit_file", {"path": "notes.md", "old_text": "alpha", "new_text": "beta"})],
        [("write_file", {"path": "long.txt", "content": LONG}), ("read_file", {"path": "long.txt"})],
        [],  # no tool call: the runner nudges once
        [("write_file", {"path": "job.toml", "content": MINIMAL_JOB_TOML}), ("submit_job", {})],
        [("edit_file", {"path": "notes.md", "old_text": "beta", "new_text": "gamma"}), ("submit_job", {})],
    ]
    return msgspec.convert(
        {
            "name": "t",
            "family": "calc_chain",
            "turns": [{"tool_calls": [{"name": n, "arguments": a} for n, a in calls]} for calls in turns],
        },
        Trajectory,
    )


def _setup(root: Path) -> EpisodeSetup:
    return EpisodeSetup(
        episode_id="ep-1",
        task_id="calc_chain/dev/0",
        spec=load_spec(CALC_SPEC_PATH),
        spec_json=CALC_SPEC_PATH.read_bytes(),
        workspace=root / "ws",
        initial_files={"INSTRUCTIONS.md": b"# do it\n"},
        messages=[{"role": "system", "content": "you are a trainer"}, {"role": "user", "content": "teach calc"}],
        baselines={"Qwen/Qwen3-0.6B": 0.5},
        max_turns=12,
    )


async def _run(run: Path, resume_from_log: bool) -> tuple[Any, dict[str, Any]]:
    async with Runtime(run, [EpisodesProjection()]) as rt:
        blobs = BlobStore(run / "blobs")
        point = None
        if resume_from_log:
            history = episode_histories(read_log(rt.log.path).records, ["ep-1"])["ep-1"]
            point = resume_point(history, blobs, max_attempts=3)
        runner = EpisodeRunner(rt, blobs, ScriptedPolicy(_trajectory()), FakeValidator(accept_from=2))
        out = await runner.run(_setup(run), point)
        return out, rt.states["episodes"]["ep-1"]


def _counts(run: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in read_log(run / "events.jsonl").records:
        out[rec.type] = out.get(rec.type, 0) + 1
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    run = tmp_path_factory.mktemp("ref") / "run"
    out, ep = anyio.run(_run, run, False)
    assert out.status == "validated" and out.attempts == 2
    return run, out, ep


def test_a_long_tool_result_is_kept_whole(reference: tuple[Path, Any, Any]) -> None:
    run, out, _ = reference
    long_read = [
        m for m in out.messages if m.get("role") == "tool" and "end" in m["content"] and "xxxx" in m["content"]
    ]
    assert long_read and long_read[0]["content"] == LONG
    blobs = BlobStore(run / "blobs")
    returned = [r.event for r in read_log(run / "events.jsonl").records if r.type == "tool.returned"]
    cut = [e for e in returned if e.blob]  # type: ignore[attr-defined]
    assert len(cut) == 1 and blobs.get(cut[0].blob).decode() == LONG  # type: ignore[attr-defined]


def test_resume_at_every_event_ends_like_the_uninterrupted_episode(
    tmp_path: Path, reference: tuple[Path, Any, Any]
) -> None:
    ref_run, ref_out, ref_ep = reference
    lines = (ref_run / "events.jsonl").read_bytes().splitlines(keepends=True)
    ref_counts = _counts(ref_run)
    for n in range(1, len(lines)):
        run = tmp_path / f"cut{n}"
        run.mkdir()
        (run / "events.jsonl").write_bytes(b"".join(lines[:n]))
        shutil.copytree(ref_run / "blobs", run / "blobs")
        out, ep = anyio.run(_run, run, True)
        where = f"resumed after event {n - 1} ({read_log(run / 'events.jsonl').records[n - 1].type})"
        assert (out.status, out.attempts, out.turns) == (ref_out.status, ref_out.attempts, ref_out.turns), where
        if n > 1:  # cut after episode.started or later: the conversation is rebuilt and continued
            assert out.messages == ref_out.messages, where
        assert ep.files == ref_ep.files and ep.status == "validated" and ep.validated_attempt == 2, where
        counts = _counts(run)
        for kind in ("agent.turn_taken", "submission.received", "episode.finished", "episode.started"):
            assert counts.get(kind, 0) == ref_counts[kind], (where, kind)
        assert counts["submission.validated"] + counts["submission.rejected"] <= 2, where
        assert (run / "ws" / "notes.md").read_text() == "gamma\n", where
