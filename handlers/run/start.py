"""Opening (or reopening) a run: the header events every run needs before any reactor acts.

On a new log: ``run.started`` (config, seed, code version, key fingerprint). On an existing one:
``run.resumed``, then every reservation a crash left open is charged, and the cross-run cost ledger catches
up with the log. Either way the run's budget caps are (re)stated against the ledger, and the frozen
baselines the run uses are copied into its log once, so rewards recompute from the log alone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from anyio.streams.memory import MemoryObjectReceiveStream

from engine.runtime import Runtime
from events import BaselineFrozen, CostSettled, Recorded, RunResumed, RunStarted
from handlers.budget.costs_ledger import CostsLedger
from handlers.budget.rules import BudgetConfig, BudgetGate, BudgetProjection, budget_set
from handlers.reward.baseline_projection import BaselinesProjection
from handlers.run.resume_reads import sync_ledger

__all__ = ["LedgerReactor", "code_version", "open_run"]


def code_version() -> str:
    """The git commit of the code running this (with '+dirty' when the tree has changes), or 'unknown'."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


async def open_run(
    rt: Runtime,
    *,
    seed: int,
    config: Mapping[str, Any],
    budget: BudgetConfig,
    ledger: CostsLedger,
    baselines: Sequence[BaselineFrozen],
    key_fingerprint: str = "",
) -> bool:
    """Emit the run's header events; returns True when this resumed an existing run.

    ``baselines`` are the frozen scores the run's rewards use, as the baselines file (or the run config) gives
    them, each with its ``n`` and key fingerprint; one already in the log with the same score is not repeated."""
    resumed = rt.next_seq > 0
    if resumed:
        await rt.emit(
            RunResumed(
                from_seq=rt.next_seq, recovered_torn_bytes=rt.log.recovery.torn_bytes, code_version=code_version()
            )
        )
    else:
        await rt.emit(
            RunStarted(
                run_id=rt.run_id,
                seed=seed,
                code_version=code_version(),
                config=dict(config),
                key_fingerprint=key_fingerprint,
            )
        )
    await rt.emit(budget_set(budget, global_spent_before_usd=ledger.total_usd(exclude_run=rt.run_id)))
    if resumed:
        await BudgetGate.for_runtime(rt).settle_orphans()
        sync_ledger(ledger, rt.run_id, rt.log.path, rt.state(BudgetProjection))
    frozen: dict[str, dict[str, float]] = rt.state(BaselinesProjection)
    for e in sorted(baselines, key=lambda e: (e.family, e.model)):
        if frozen.get(e.family, {}).get(e.model) != e.score:
            await rt.emit(e)
    return resumed


class LedgerReactor:
    """Appends every ``cost.settled`` of the run to the cross-run ledger (idempotent by (run, seq))."""

    def __init__(self, ledger: CostsLedger) -> None:
        self.ledger = ledger

    async def __call__(self, rt: Runtime, stream: MemoryObjectReceiveStream[Recorded]) -> None:
        async for rec in stream:
            if isinstance(rec.event, CostSettled):
                self.ledger.record(rt.run_id, rec)
