"""`ait episode`'s first-use freeze, as a stranger reads it in a log file: one plain line per pair, never a bar cut
to 80 columns; a pair this machine scored before says so."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from cli.first_use import freeze_with_progress


def _piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=80), out


def test_written_to_a_file_each_pair_is_one_plain_line_and_a_second_freeze_takes_the_memo(tmp_path: Path) -> None:
    console, out = _piped()
    assert not console.is_terminal  # the premise: what `ait episode > log` gets
    first = freeze_with_progress(
        tmp_path / "a.json", "calc_chain", ["Qwen/Qwen3-0.6B"], "f" * 16, limit=2, seed=0, console=console
    )
    text = out.getvalue()
    (frozen,) = first
    line = f"baseline Qwen/Qwen3-0.6B on calc_chain: score {frozen.score:.3f} (n=2) in "
    assert line in text, text
    assert "ETA" not in text and "…" not in text, text  # no bar drawn once at the end and cut short

    # Another baselines file, the same weights, tasks and eval settings: this machine's score memo answers.
    console, out = _piped()
    second = freeze_with_progress(
        tmp_path / "b.json", "calc_chain", ["Qwen/Qwen3-0.6B"], "f" * 16, limit=2, seed=0, console=console
    )
    assert [e.score for e in second] == [frozen.score]
    taken = f"baseline Qwen/Qwen3-0.6B on calc_chain: score {frozen.score:.3f} (n=2), taken before here"
    assert taken in out.getvalue() and not re.search(r"\bin \d+ s\b", out.getvalue()), out.getvalue()  # not scored
