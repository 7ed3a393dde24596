"""adapters.prime_rl.progress: following growing files and turning prime-rl rows and lines into progress."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from adapters.prime_rl.progress import LineFollower, TrainTracker


def test_follower_waits_for_the_file_and_for_complete_lines(tmp_path: Path) -> None:
    f = LineFollower(tmp_path / "later" / "metrics.jsonl")
    assert f.read_new() == []
    (tmp_path / "later").mkdir()
    path = tmp_path / "later" / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": ')
    assert f.read_new() == ['{"step": 1}']
    with path.open("a") as out:
        out.write('2}\n\n{"step": 3}\n')
    assert f.read_new() == ['{"step": 2}', '{"step": 3}']
    assert f.read_new() == []


@given(st.lists(st.text(st.characters(blacklist_characters="\n\r", codec="utf-8"), min_size=1), max_size=8), st.data())
def test_follower_yields_every_line_once_whatever_the_chunking(lines: list[str], data: st.DataObject) -> None:
    import tempfile

    text = "".join(line + "\n" for line in lines).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=5)))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f"
        follower, got, last = LineFollower(path), [], 0
        for cut in [*cuts, len(text)]:
            with path.open("ab") as out:
                out.write(text[last:cut])
            last = max(last, cut)
            got += follower.read_new()
    # Blank means ASCII whitespace only (as bytes.strip sees it: str.strip would also drop \x1c-\x1f).
    assert got == [line for line in lines if line.encode().strip()]


ORCH = (
    "\x1b[2m10:00:03\x1b[0m \x1b[32m\x1b[1mSUCCESS\x1b[0m \x1b[32mStep 2 |   1.2s | Reward 0.3750 | "
    "Trainable 6/8 (75.0%) | Turns 2.0 | Branches 1.0 | Max Off-Policy 1 | Error 12.5% | Cancelled 0.0% | "
    "Truncation 0.0%\x1b[0m"
)
TRAINER = (
    "10:00:04 SUCCESS Step 2 |   1.1s | Loss 0.0123 | Entropy 0.4100 | Grad. Norm 0.8000 | LR 3.00e-06 | "
    "Throughput 5120 tokens/s | MFU 12.0% | Peak Mem. 13.4 GiB"
)


def test_tracker_merges_orchestrator_and_trainer_and_reports_changes_once() -> None:
    t = TrainTracker(total_steps=5)
    t.feed_metrics_line(
        json.dumps(
            {
                "step": 1,
                "time": 1.0,
                "train/agg/all/agent/reward/mean": 0.25,
                "train/calc/all/agent/reward/mean": 0.5,
                "train/agg/all/has_error/mean": 0.0,
            }
        )
    )
    (p,) = t.pending_progress()
    assert (p.step, p.reward, p.loss, p.total_steps) == (1, 0.25, None, 5)  # agg wins over a per-env key
    assert t.pending_progress() == []
    t.feed_metrics_line(json.dumps({"step": 1, "loss/mean": 0.02, "perf/peak_memory": 12.0, "optim/lr": 3e-6}))
    (p,) = t.pending_progress()
    assert (p.reward, p.loss) == (0.25, 0.02) and "loss 0.0200" in p.message
    t.feed_orchestrator_line(ORCH)
    t.feed_trainer_line(TRAINER)
    (p,) = t.pending_progress()
    assert (p.step, p.reward, p.loss) == (2, 0.375, 0.0123)
    assert t.steps[2].has_error == 0.125
    s = t.summary()
    assert s["steps_done"] == 2.0 and s["reward_first"] == 0.25 and s["reward_last"] == 0.375
    assert s["loss_last"] == 0.0123 and s["peak_memory_gib"] == 13.4 and s["optim/lr"] == 3e-6


def test_tracker_ignores_torn_or_foreign_rows() -> None:
    t = TrainTracker(total_steps=2)
    for line in ('{"step": 1, "loss/mean":', "[1, 2]", '{"step": "x"}', '{"time": 3}', "not json"):
        t.feed_metrics_line(line)
    assert t.steps == {} and t.pending_progress() == []


def test_all_errors_needs_consecutive_full_error_steps() -> None:
    t = TrainTracker(total_steps=9)
    for step, rate in ((1, 1.0), (2, 0.5), (3, 1.0), (4, 1.0)):
        t.feed_metrics_line(json.dumps({"step": step, "train/agg/all/has_error/mean": rate}))
    assert not t.all_errors_for(3)
    t.feed_metrics_line(json.dumps({"step": 5, "train/agg/all/has_error/mean": 1.0}))
    assert t.all_errors_for(3)
