"""What ``ait resume`` reads from a run's log besides the state the runtime rebuilds (snapshot + tail).

Each read takes only the records it needs (:mod:`engine.pick`: a line is decoded only when it holds the
needle every wanted record's line holds), so a resume's start-up does not decode the whole log again:

- the cost ledger catches up only when it holds fewer of the run's settlements than the budget projection
  counts (the usual case after a clean stop: none missing, nothing read), and then from the ``cost.settled``
  lines alone;
- the rewarder's catch-up sees the records it acts on (baselines frozen, episodes finished, jobs' outcomes);
- the episodes a resumed step reopens get their own events (lines naming their ``episode_id``).

Each gives what the full read gave (the same records, in log order): the callers' tests are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.pick import needle_of_field, needle_of_type, pick_records
from events import CostSettled, EventBody, Recorded
from handlers.budget.costs_ledger import CostsLedger
from handlers.budget.rules import BudgetState
from handlers.episode.resume import episode_histories

__all__ = ["histories_from_log", "records_of_types", "sync_ledger"]


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


def histories_from_log(path: Path | str, episode_ids: Iterable[str]) -> dict[str, list[EventBody]]:
    """:func:`handlers.episode.resume.episode_histories` of these episodes, reading only their lines."""
    wanted = set(episode_ids)
    if not wanted:
        return {}
    needles = [needle_of_field("episode_id", e) for e in wanted]

    def names_one(rec: Recorded) -> bool:
        eid = getattr(rec.event, "episode_id", None)
        return isinstance(eid, str) and eid in wanted

    return episode_histories(pick_records(path, needles, names_one), wanted)
