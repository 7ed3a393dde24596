"""The ledger's catch-up on resume: the same rows as a full read gave, and no read at all when none is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

import handlers.run.resume_reads as resume_reads
from engine.log import read_log
from engine.replay import replay
from events import CostSettled, Recorded
from handlers.budget.costs_ledger import CostsLedger, rows_from_log
from handlers.budget.rules import BudgetState
from handlers.registry import default_projections
from handlers.reward.reactor import RewardReactor
from handlers.run.resume_reads import records_of_types, sync_ledger
from tests.golden.make_run_log import OUT

GOLDEN = OUT / "events.jsonl"


@pytest.fixture(scope="module")
def records() -> list[Recorded]:
    return read_log(GOLDEN).records


def test_the_rewarders_records_are_those_it_observes_in_the_full_log(records: list[Recorded]) -> None:
    want = [r for r in records if isinstance(r.event, RewardReactor.observes)]
    assert len(want) > 10
    assert records_of_types(GOLDEN, RewardReactor.observes) == want


def test_the_ledger_catches_up_and_is_not_read_again_once_complete(
    tmp_path: Path, records: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    budget: BudgetState = replay(GOLDEN, default_projections()).states["budget"]
    settled = rows_from_log("golden", records)
    assert budget.settlements == len(settled) > 0
    ledger = CostsLedger(tmp_path / "costs.jsonl")
    ledger.append(settled[:-1])  # a crash before the ledger reactor wrote the last one
    assert sync_ledger(ledger, "golden", GOLDEN, budget) == 1
    assert sorted(r.key for r in ledger.read() if r.run_id == "golden") == sorted(r.key for r in settled)

    def no_read(*_args: object) -> list[Recorded]:
        raise AssertionError("the log was read")

    monkeypatch.setattr(resume_reads, "records_of_types", no_read)
    assert sync_ledger(ledger, "golden", GOLDEN, budget) == 0  # complete: nothing read
    ledger.append(rows_from_log("other-run", [r for r in records if isinstance(r.event, CostSettled)]))
    assert sync_ledger(ledger, "golden", GOLDEN, budget) == 0  # another run's rows do not count
