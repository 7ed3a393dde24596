"""``ait holdout`` finding the run that published a checkpoint: only logs holding the path are decoded, and a
damaged log of another run does not stop the search."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from cli import main
from engine.clock import ManualClock
from engine.log import LogCorrupted, read_log
from engine.runtime import Runtime
from events import (
    AgentTurnTaken,
    EpisodeFinished,
    EpisodeStarted,
    EventBody,
    RewardComputed,
    RunStarted,
    SamplerPublished,
)
from tests.cli.train_digest import duplicates
from tests.fakes.ait_process import run_ait

CKPT = "tinker://run-b/sampler_weights/000002"


def write_run(root: Path, name: str, bodies: list[EventBody], mtime: float) -> Path:
    run = root / name

    async def write() -> None:
        async with Runtime(run, [], clock=ManualClock()) as rt:
            await rt.emit(RunStarted(run_id=name, seed=1, code_version="t"))
            for body in bodies:
                await rt.emit(body)

    anyio.run(write)
    log = run / "events.jsonl"
    os.utime(log, (mtime, mtime))
    return log


def damage_line(log: Path, line_no: int) -> None:
    """Flip one character inside line ``line_no`` (1-based), which is not the last: a corrupt record."""
    lines = log.read_bytes().splitlines(keepends=True)
    line = lines[line_no - 1]
    i = line.index(b'"seed"') if b'"seed"' in line else line.index(b'"v"')
    lines[line_no - 1] = line[:i] + b"X" + line[i + 1 :]
    log.write_bytes(b"".join(lines))


def holdout(root: Path, checkpoint: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``ait holdout --checkpoint CHECKPOINT`` with no ``--run``: (exit status, its one-line message)."""
    code = main(["--runs-root", str(root), "holdout", "--checkpoint", checkpoint])
    return code, capsys.readouterr().err.strip().removeprefix("ait holdout: ")


def test_the_newest_run_that_published_it_is_found_past_damaged_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    published = SamplerPublished(sampler_version=2, path=CKPT, step=2)
    write_run(tmp_path, "b", [published], mtime=1_000)
    # Newer than b: a damaged log without the path, and a damaged log that holds it.
    other = write_run(tmp_path, "a", [SamplerPublished(sampler_version=1, path="tinker://elsewhere")], mtime=2_000)
    holder = write_run(tmp_path, "c", [published, SamplerPublished(sampler_version=3, path="x")], mtime=3_000)
    damage_line(other, 1)
    damage_line(holder, 1)
    os.utime(other, (2_000, 2_000))
    os.utime(holder, (3_000, 3_000))
    for log in (other, holder):  # both are really damaged: reading them raises
        with pytest.raises(LogCorrupted):
            read_log(log)
    # Found: b (an `ait episode`-like log here, so the command then stops on it, naming it).
    assert holdout(tmp_path, CKPT, capsys) == (2, f"{tmp_path / 'b'}/events.jsonl: not an `ait train` run")
    code, message = holdout(tmp_path, "tinker://never-published", capsys)
    assert code == 2 and "no run under" in message


def test_a_log_without_the_path_is_not_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, "b", [SamplerPublished(sampler_version=2, path=CKPT)], mtime=1_000)
    write_run(tmp_path, "a", [SamplerPublished(sampler_version=1, path="tinker://elsewhere")], mtime=2_000)
    decoded: list[Path] = []

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        decoded.append(Path(path))
        return read_log(path)

    monkeypatch.setattr("engine.log.read_log", counting)
    assert holdout(tmp_path, CKPT, capsys)[0] == 2  # found b, then stopped on it: not an `ait train` run
    assert set(decoded) == {tmp_path / "b" / "events.jsonl"}


ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"


def cut_before(log: Path, wanted: Callable[[EventBody], bool]) -> None:
    """Keep the log up to (not including) the last record ``wanted`` picks: what a kill -9 just before it leaves.
    The snapshots go too (they would be ignored anyway: their anchor is past the new end)."""
    records = read_log(log).records
    seq = max(r.seq for r in records if wanted(r.event))
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:seq]))
    for snap in log.parent.glob("snapshot*"):
        snap.unlink()


def arm_of(log: Path, group: str) -> tuple[list[str], set[str]]:
    """(the arm's episodes by id: they start concurrently, those rewarded)."""
    events = [r.event for r in read_log(log).records]
    started = sorted(e.episode_id for e in events if isinstance(e, EpisodeStarted) and e.group_id == group)
    return started, {e.episode_id for e in events if isinstance(e, RewardComputed) and e.episode_id in started}


@pytest.mark.slow
def test_an_interrupted_arm_is_carried_on_to_n_episodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(tmp_path)
    assert main(["--runs-root", runs, "train", "--config", str(SMOKE), "--run-id", "s"]) == 0
    log = tmp_path / "s" / "events.jsonl"
    base = ["--runs-root", runs, "holdout", "--checkpoint", "base", "--run", "s", "-n"]
    assert main([*base, "2"]) == 0
    started, rewarded = arm_of(log, "holdout-v0")
    assert started == ["ho00000", "ho00001"] and rewarded == set(started)

    # 1. Killed between the later episode's job outcome and its reward: the reward is owed, nothing is re-run.
    last = max(started, key=lambda e: next(r.seq for r in read_log(log).records if rewards(r.event, e)))
    cut_before(log, lambda e: rewards(e, last))
    assert arm_of(log, "holdout-v0")[1] == set(started) - {last}
    capsys.readouterr()
    assert main([*base, "2", "--continue"]) == 0
    assert "1 episode(s) done, 1 carried on, 0 new (to 2)" in capsys.readouterr().out
    assert arm_of(log, "holdout-v0") == (started, set(started)) and duplicates(log.parent) == []

    # 2. Killed in the middle of an episode (before it finished): without --continue a new arm episode is started
    # and the unfinished one is named; --continue then carries it on from its last turn, to n = 3.
    assert main([*base, "2"]) == 0
    started, _ = arm_of(log, "holdout-v0")
    assert started[2:] == ["ho00002", "ho00003"]
    cut_before(log, lambda e: isinstance(e, EpisodeFinished) and e.episode_id == "ho00003")
    before = [r.event for r in read_log(log).records]
    turns = sum(1 for e in before if isinstance(e, AgentTurnTaken) and e.episode_id == "ho00003")
    assert turns >= 1  # it had started talking: a continuation, not a fresh start
    capsys.readouterr()
    assert main([*base, "1"]) == 0
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if "unfinished episode(s) from an earlier, interrupted" in line)
    assert "ho00003" in note  # (ho00002 too when its reward came after the cut: they run concurrently)
    started, rewarded = arm_of(log, "holdout-v0")
    assert started[-1] == "ho00004" and "ho00003" not in rewarded
    unfinished = [e for e in started if e not in rewarded]
    assert main([*base, "5", "--continue"]) == 0
    expected = f"{len(rewarded)} episode(s) done, {len(unfinished)} carried on, {5 - len(started)} new (to 5)"
    assert expected in capsys.readouterr().out and len(started) == 5
    started, rewarded = arm_of(log, "holdout-v0")
    assert started == [f"ho{i:05d}" for i in range(5)] and rewarded == set(started)
    assert duplicates(log.parent) == []  # no turn, submission, job or reward twice
    # ... and once complete, --continue to a larger n only starts what is missing.
    assert main([*base, "6", "--continue"]) == 0
    assert "5 episode(s) done, 0 carried on, 1 new (to 6)" in capsys.readouterr().out
    assert arm_of(log, "holdout-v0")[0][-1] == "ho00005"


def rewards(event: EventBody, episode_id: str) -> bool:
    return isinstance(event, RewardComputed) and event.episode_id == episode_id


@pytest.mark.slow
def test_an_arm_killed_mid_way_is_completed_by_continue(tmp_path: Path) -> None:
    """A real kill -9 (cli/crash_hook.py) at two points of an arm of 3: in the first two episodes' conversations,
    and once the third is under way with one reward in; `--continue` then completes the arm, nothing twice."""
    trained = tmp_path / "trained"
    assert run_ait(trained, "train", "--config", str(SMOKE), "--run-id", "s").returncode == 0
    start = len(read_log(trained / "s" / "events.jsonl").records)
    arm = ["holdout", "--checkpoint", "base", "--run", "s", "-n", "3"]
    for offset in (70, 160):
        runs = tmp_path / f"killed-{offset}"
        shutil.copytree(trained, runs)
        log = runs / "s" / "events.jsonl"
        killed = run_ait(runs, *arm, kill_after=start + offset)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        started, rewarded = arm_of(log, "holdout-v0")
        assert started and len(rewarded) < 3  # killed inside the arm
        done = run_ait(runs, *arm, "--continue")
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"{len(rewarded)} episode(s) done, {len(started) - len(rewarded)} carried on" in done.stdout
        assert arm_of(log, "holdout-v0") == (["ho00000", "ho00001", "ho00002"], {"ho00000", "ho00001", "ho00002"})
        assert duplicates(runs / "s") == []
