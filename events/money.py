"""Spend events: every dollar is reserved before it is spent and settled (or released) after.

A reservation is an upper bound taken before an LLM call or a pod launch; ``cost.settled`` records what was
really spent (the design's ``CostIncurred``), ``cost.released`` closes a reservation that spent nothing, and
``cost.refused`` says which budget would have been exceeded. ``budget.set`` carries the caps and the spend of
other runs into the log, so that the budget projection stays a pure fold (see :mod:`handlers.budget.rules`).
"""

from __future__ import annotations

from ._base import EventBody, event

__all__ = ["BudgetSet", "CostRefused", "CostReleased", "CostReserved", "CostSettled"]


@event("budget.set")
class BudgetSet(EventBody, frozen=True, kw_only=True):
    """The caps in force from here on, in USD (``None``: no cap). Emitted at run start and at every resume.

    ``global_spent_before_usd`` is what the cross-run ledger held for *other* runs when this was emitted: the
    global cap applies to it plus this run's own spend.
    """

    episode_usd: float | None = None
    run_usd: float | None = None
    global_usd: float | None = None
    global_spent_before_usd: float = 0.0
    ledger: str = ""  # the ledger file the global figure was read from


@event("cost.reserved")
class CostReserved(EventBody, frozen=True, kw_only=True):
    reservation_id: str
    kind: str  # what it is for: "episode" | "job" | "baseline" | "holdout" | "training"
    ref: str  # an episode id, a job id, ...
    usd: float
    episode_id: str = ""  # charged to this episode's budget ("" = no episode budget applies)
    item: str = ""  # the model or GPU type it prices


@event("cost.settled")
class CostSettled(EventBody, frozen=True, kw_only=True):
    """Spend that happened (the ``CostIncurred`` of the design): tokens or pod-seconds, priced in USD.

    ``input_tokens`` counts every prompt token, ``cached_input_tokens`` of which were cache hits (the OpenAI
    usage convention). ``usd`` may be above ``reserved_usd``: money spent is always recorded.
    ``estimated`` marks a settlement charged at the reserved amount because the real figure is unknown
    (a crash mid-call, or a hold left without settling).
    """

    reservation_id: str  # "" for spend that was never reserved
    kind: str
    ref: str
    usd: float
    reserved_usd: float = 0.0
    item: str = ""  # the model or GPU type priced
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    train_tokens: int = 0  # tokens a learner step processed (kind "training"), priced at the model's train rate
    seconds: float = 0.0
    episode_id: str = ""
    price_version: str = ""
    estimated: bool = False
    note: str = ""


@event("cost.released")
class CostReleased(EventBody, frozen=True, kw_only=True):
    """A reservation closed with nothing spent (the call failed before anything was billed)."""

    reservation_id: str
    kind: str
    ref: str
    reason: str = ""
    episode_id: str = ""


@event("cost.refused")
class CostRefused(EventBody, frozen=True, kw_only=True):
    kind: str
    ref: str
    budget: str  # which budget refused: "episode" | "run" | "global"
    requested_usd: float
    remaining_usd: float
    episode_id: str = ""
    item: str = ""
    message: str = ""
