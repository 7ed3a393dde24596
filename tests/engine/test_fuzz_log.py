"""Fuzz the event log reader and its recovery with mutated log files (tests/fuzzing.py: budgets, tally).

Every mutation of a valid log must end in one of: a :class:`LogCorrupted` naming the file and a line; a
recovered valid prefix of the original with the rest reported as a torn tail (no newline in it) or as a
corrupt complete final line (whose bytes recovery sets aside, byte for byte); or, when the mutation only cut
whole lines from the end, the shorter valid log. Never another exception, never a damaged byte accepted.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.log import LogCorrupted, Recovery, read_log, recover_log
from events import Recorded
from events.codec import encode_record
from tests.engine.spine_model import body_for
from tests.fuzzing import fuzz_settings, record, untallied

SURFACE = "event log"
N = 6
RECORDS = [Recorded(i, 1_764_460_800.0 + i, body_for(i)) for i in range(N)]
LINES = [encode_record(r) for r in RECORDS]
ORIGINAL = b"".join(LINES)
BOUNDARIES = {sum(len(x) for x in LINES[:k]) for k in range(N + 1)}


@st.composite
def mutated_logs(draw: st.DrawFn) -> bytes:
    data = bytearray(ORIGINAL)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete", "dup_line", "drop_line", "swap", "append"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b"\n", b"\0" * 16, b"{}\n"]))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        else:
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "dup_line":
                lines.insert(i, lines[i])
            elif kind == "drop_line" and len(lines) > 1:
                del lines[i]
            elif kind == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            elif kind == "append":
                lines.append(draw(st.binary(max_size=30)).replace(b"\n", b""))
                if draw(st.booleans()):
                    lines.append(b"")
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def check_one(data: bytes, workdir: Path, reader: Callable[[Path], Recovery] = read_log) -> None:
    path = workdir / "events.jsonl"
    path.write_bytes(data)
    try:
        found = reader(path)
    except LogCorrupted as exc:
        assert re.match(rf"{re.escape(str(path))}:\d+: \S", str(exc)) and "\n" not in str(exc), str(exc)
        assert 1 <= exc.line_no <= data.count(b"\n") + 1
        assert path.read_bytes() == data  # a refused log is left alone
        record(SURFACE, "clean_error", "line_named")
        return
    except Exception:
        record(SURFACE, "traceback")
        raise
    size, corrupt, torn = found.size, found.corrupt_bytes, found.torn_bytes
    assert size + corrupt + torn == len(data)
    valid_prefix = size in BOUNDARIES and data[:size] == ORIGINAL[:size]
    if not valid_prefix or found.records != RECORDS[: len(found.records)]:
        record(SURFACE, "silent_accept")
        raise AssertionError(f"damaged bytes accepted into the log's valid prefix ({size} bytes)")
    assert b"\n" not in data[len(data) - torn :]  # a torn tail is what follows the last newline
    if corrupt:
        line = data[size : size + corrupt]
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert found.corrupt_line == len(found.records) + 1 and found.corrupt_reason
    else:
        assert found.corrupt_line == 0
    # Recovery cuts exactly what follows the valid prefix, and keeps the corrupt part of it.
    recovered = recover_log(path)
    assert path.read_bytes() == data[:size]
    if corrupt:
        aside = Path(recovered.set_aside)
        assert aside.read_bytes() == data[size:]
        aside.unlink()  # only this test's scratch directory
        record(SURFACE, "clean_error", "corrupt_final_record")
    elif torn:
        record(SURFACE, "clean_error", "torn_tail")
    else:
        assert data == ORIGINAL[:size]
        record(SURFACE, "accepted", "whole_lines_cut" if size < len(ORIGINAL) else "unchanged")


@fuzz_settings(ci=300, long=4000)
@given(data=mutated_logs())
def test_every_mutated_log_is_refused_with_its_line_or_recovered_to_a_true_prefix(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        check_one(data, Path(d))


def test_the_oracle_sees_a_damaged_byte_accepted(tmp_path: Path) -> None:
    """The fuzz oracle can fail: a reader that took a flipped byte as a valid record is caught."""
    flipped = bytearray(ORIGINAL)
    flipped[30] ^= 0x01
    with untallied(), pytest.raises(AssertionError, match="damaged bytes accepted"):
        check_one(bytes(flipped), tmp_path, reader=lambda _p: Recovery(RECORDS, len(flipped), 0))
