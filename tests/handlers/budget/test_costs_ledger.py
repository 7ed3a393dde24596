"""The cross-run ledger: idempotent appends, crash recovery, concurrent writers, summaries and ``ait costs``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import JobQueued, Recorded
from events.money import CostSettled
from handlers.budget.costs_ledger import (
    GROUPINGS,
    CostsLedger,
    LedgerError,
    LedgerRow,
    costs_command,
    rows_from_log,
    summarise,
)

DAY = 86_400.0
T0 = 1_764_460_800.0  # 2025-11-30 00:00 UTC


def settled(seq: int, usd: float, *, kind: str = "episode", item: str = "gpt-4.1", ts: float = T0) -> Recorded:
    body = CostSettled(
        reservation_id=f"res-{seq}",
        kind=kind,
        ref="ep-1",
        usd=usd,
        item=item,
        input_tokens=100,
        cached_input_tokens=40,
        output_tokens=10,
        episode_id="ep-1",
    )
    return Recorded(seq, ts, body)


def test_rows_come_from_settled_costs_only_and_carry_the_day() -> None:
    log = [
        settled(0, 0.5),
        Recorded(1, T0, JobQueued(job_id="j", episode_id="e", family="f", base_model="m", bundle="b")),
        settled(2, 0.25, ts=T0 + DAY + 5),
    ]
    rows = rows_from_log("run-a", log)
    assert [(r.seq, r.usd, r.day) for r in rows] == [(0, 0.5, "2025-11-30"), (2, 0.25, "2025-12-01")]


def test_append_is_idempotent_by_run_and_seq(tmp_path: Path) -> None:
    ledger = CostsLedger(tmp_path / "costs.jsonl")
    assert ledger.record("run-a", settled(0, 0.5))
    assert not ledger.record("run-a", settled(0, 0.5))
    assert ledger.record("run-b", settled(0, 0.5))  # another run's seq 0 is another cost
    again = CostsLedger(tmp_path / "costs.jsonl")  # a fresh reader (another process) sees the same
    assert [(r.run_id, r.seq) for r in again.read()] == [("run-a", 0), ("run-b", 0)]
    assert again.append(again.read()) == 0


def test_sync_appends_what_a_crash_left_out(tmp_path: Path) -> None:
    log = [settled(i, 0.1 * (i + 1)) for i in range(5)]
    ledger = CostsLedger(tmp_path / "costs.jsonl")
    for rec in log[:2]:
        ledger.record("run-a", rec)
    # crash: seq 2..4 are in the log but not the ledger
    assert CostsLedger(tmp_path / "costs.jsonl").sync("run-a", log) == 3
    assert CostsLedger(tmp_path / "costs.jsonl").read() == rows_from_log("run-a", log)


def test_a_torn_last_line_is_ignored_then_cut_by_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "costs.jsonl"
    ledger = CostsLedger(path)
    ledger.record("run-a", settled(0, 0.5))
    with open(path, "ab") as f:
        f.write(b'{"run_id":"run-a","seq":1,"ts":')  # a writer died mid-line
    assert [r.seq for r in CostsLedger(path).read()] == [0]
    CostsLedger(path).record("run-a", settled(2, 0.5))
    assert [r.seq for r in CostsLedger(path).read()] == [0, 2]
    assert path.read_bytes().count(b"\n") == 2


def test_a_bad_line_mid_file_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "costs.jsonl"
    ledger = CostsLedger(path)
    ledger.record("run-a", settled(0, 0.5))
    with open(path, "ab") as f:
        f.write(b"not json\n")
    with pytest.raises(LedgerError, match=rf"{path}:2: not a ledger row"):
        CostsLedger(path).read()
    with pytest.raises(LedgerError, match=rf"{path}:2: not a ledger row"):  # and nothing is appended after it
        CostsLedger(path).record("run-a", settled(1, 0.5))
    assert path.read_bytes().count(b"\n") == 2


def test_total_leaves_out_one_run(tmp_path: Path) -> None:
    ledger = CostsLedger(tmp_path / "costs.jsonl")
    ledger.record("run-a", settled(0, 1.0))
    ledger.record("run-b", settled(0, 2.5))
    assert ledger.total_usd() == pytest.approx(3.5)
    assert ledger.total_usd(exclude_run="run-b") == pytest.approx(1.0)
    assert CostsLedger(tmp_path / "missing.jsonl").total_usd() == 0.0


def test_concurrent_processes_append_every_row_once(tmp_path: Path) -> None:
    path = tmp_path / "costs.jsonl"
    script = textwrap.dedent(
        f"""
        import sys
        from events import Recorded
        from events.money import CostSettled
        from handlers.budget.costs_ledger import CostsLedger
        run = sys.argv[1]
        for seq in range(150):
            rec = Recorded(seq, 0.0, CostSettled(reservation_id="", kind="job", ref="j", usd=0.01))
            CostsLedger({str(path)!r}).record(run, rec)  # a fresh handle each time: re-reads what others wrote
        """
    )
    root = Path(__file__).resolve().parents[3]
    procs = [subprocess.Popen([sys.executable, "-c", script, run], cwd=root) for run in ("run-a", "run-b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    rows = CostsLedger(path).read()
    assert len(rows) == 300
    assert len({r.key for r in rows}) == 300


row_st = st.builds(
    LedgerRow,
    run_id=st.sampled_from(["run-a", "run-b", "run-c"]),
    seq=st.integers(0, 10**6),
    ts=st.just(T0),
    day=st.sampled_from(["2026-11-01", "2026-11-02"]),
    kind=st.sampled_from(["episode", "job", "holdout"]),
    ref=st.just("r"),
    usd=st.floats(0, 10),
    item=st.sampled_from(["", "gpt-4.1", "NVIDIA A40"]),
    input_tokens=st.integers(0, 10**6),
    seconds=st.floats(0, 1e5),
    estimated=st.booleans(),
)


@given(st.lists(row_st, max_size=40), st.sampled_from(GROUPINGS))
@settings(max_examples=60)
def test_summaries_partition_the_ledger(rows: list[LedgerRow], by: str) -> None:
    groups = summarise(rows, by)
    assert sum(g.entries for g in groups) == len(rows)
    assert sum(g.usd for g in groups) == pytest.approx(sum(r.usd for r in rows))
    assert sum(g.input_tokens for g in groups) == sum(r.input_tokens for r in rows)
    assert sum(g.pod_hours for g in groups) == pytest.approx(sum(r.seconds for r in rows) / 3600)
    assert sum(g.estimated_usd for g in groups) == pytest.approx(sum(r.usd for r in rows if r.estimated))
    assert [g.key for g in groups] == sorted({g.key for g in groups})


def test_costs_command_renders_each_grouping_with_a_total(tmp_path: Path) -> None:
    path = tmp_path / "costs.jsonl"
    ledger = CostsLedger(path)
    ledger.record("run-a", settled(0, 1.25, kind="episode", ts=T0))
    ledger.record("run-a", settled(1, 2.5, kind="job", item="NVIDIA A40", ts=T0 + DAY))
    ledger.record("run-b", settled(0, 0.25, kind="holdout", ts=T0 + DAY))
    by_run = costs_command(path, "run")
    assert "run-a" in by_run and "run-b" in by_run
    assert "3.7500" in by_run and "0.2500" in by_run and "4.0000" in by_run  # per run and total
    by_day = costs_command(path, "day")
    assert "2025-11-30" in by_day and "2025-12-01" in by_day and "2.7500" in by_day
    assert "NVIDIA A40" in costs_command(path, "item")
    assert "holdout" in costs_command(path, "kind")
    assert "no costs recorded" in costs_command(tmp_path / "none.jsonl", "run")
    with pytest.raises(ValueError, match="choose one of run, kind, day, item"):
        costs_command(path, "week")
