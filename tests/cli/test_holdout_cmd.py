"""``ait holdout`` finding the run that published a checkpoint: only logs holding the path are decoded, and a
damaged log of another run does not stop the search."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from cli import main
from engine.clock import ManualClock
from engine.log import LogCorrupted, read_log
from engine.runtime import Runtime
from events import EventBody, RunStarted, SamplerPublished

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
