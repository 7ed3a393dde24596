"""The cost ledger's catch-up on resume, without reading the whole log again.

The ledger catches up only when it holds fewer of the run's settlements than the budget projection counts
(the usual case after a clean stop: none missing, nothing read), and then from the ``cost.settled`` lines
alone (:mod:`engine.pick`: a line is decoded only when it holds ``"type":"cost.settled"``): the rows it
appends are those a full read gave. (The rewarder's catch-up and the reopened episodes' histories come from
:mod:`handlers.run.resume_view`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.pick import needle_of_type, pick_records
from events import CostSettled, EventBody, Recorded
from handlers.budget.costs_ledger import CostsLedger
from handlers.budget.rules import BudgetState

__all__ = ["records_of_types", "sync_ledger"]


def records_of_types(path: Path | str, types: Sequence[type[EventBody]]) -> list[Recorded]:
    """The log's records of these event types, in log order."""
    wanted = tuple(types)
    return pick_records(path, [needle_of_type(t) for t in wanted], lambda r: isinstance(r.event, wanted))


def sync_ledger(ledger: CostsLedger, run_id: str, path: Path | str, budget: BudgetState) -> int:
    """Append every settled cost of the run's log missing from the ledger; returns how many.

    The ledger's rows of a run are keyed by (run, seq) and come only from that run's ``cost.settled``
    records, as many as the budget projection's ``settlements``: when the counts agree, none is missing."""
    have = sum(1 for row in ledger.read() if row.run_id == run_id)
    if have == budget.settlements:
        return 0
    return ledger.sync(run_id, records_of_types(path, [CostSettled]))
