"""The follower reads only complete lines, filters by type/episode/job, and names a corrupt line."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine.log import LogCorrupted
from engine.tail import LineReader, TailFilter, follow_lines
from events import EpisodeStarted, JobQueued, Recorded, RunStarted
from events.codec import encode_record


def _lines(*recs: Recorded) -> bytes:
    return b"".join(encode_record(r) for r in recs)


def test_reader_waits_for_the_rest_of_a_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    a = _lines(Recorded(0, 1.0, RunStarted(run_id="r", seed=1, code_version="c")))
    b = _lines(Recorded(1, 2.0, EpisodeStarted(episode_id="e1", task_id="t", family="f", policy="p")))
    path.write_bytes(a + b[:10])
    reader = LineReader(path)
    assert [n for n, _ in reader.read_new()] == [1]
    assert reader.read_new() == []
    with open(path, "ab") as f:
        f.write(b[10:])
    got = reader.read_new()
    assert [n for n, _ in got] == [2]
    assert got[0][1] == b[:-1]


def test_filters() -> None:
    job = Recorded(0, 0.0, JobQueued(job_id="j1", episode_id="e1", family="f", base_model="m", bundle="b"))
    ep = Recorded(1, 0.0, EpisodeStarted(episode_id="e2", task_id="t", family="f", policy="p"))
    assert TailFilter(types=("job",))(job) and not TailFilter(types=("job",))(ep)
    assert TailFilter(types=("episode.*",))(ep) and not TailFilter(types=("episode.*",))(job)
    assert TailFilter(types=("job.queued",))(job)
    assert not TailFilter(types=("job.q",))(job)
    assert TailFilter(episode="e1")(job) and not TailFilter(episode="e1")(ep)
    assert TailFilter(job="j1")(job) and not TailFilter(job="j1")(ep)


def test_follow_sees_lines_appended_later_and_stops(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(_lines(Recorded(0, 1.0, RunStarted(run_id="r", seed=1, code_version="c"))))
    seen: list[int] = []

    async def main() -> None:
        async def writer() -> None:
            for i in range(1, 4):
                await anyio.sleep(0.03)
                rec = Recorded(i, float(i), EpisodeStarted(episode_id=f"e{i}", task_id="t", family="f", policy="p"))
                with open(path, "ab") as f:
                    f.write(encode_record(rec))

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            async for _raw, rec in follow_lines(path, follow=True, poll_s=0.01, stop=lambda: len(seen) >= 4):
                seen.append(rec.seq)

    anyio.run(main)
    assert seen == [0, 1, 2, 3]


def test_corrupt_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    data = bytearray(
        _lines(
            Recorded(0, 1.0, RunStarted(run_id="r", seed=1, code_version="c")),
            Recorded(1, 1.0, RunStarted(run_id="r", seed=2, code_version="c")),
        )
    )
    data[data.index(b'"seed":2') + 7] = ord("3")
    path.write_bytes(bytes(data))

    async def main() -> None:
        async for _ in follow_lines(path, follow=False):
            pass

    with pytest.raises(LogCorrupted) as info:
        anyio.run(main)
    assert info.value.line_no == 2
    assert "checksum" in info.value.reason
