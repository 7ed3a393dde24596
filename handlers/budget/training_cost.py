"""What a learner step costs: the tokens it trained on, priced at the model's train rate; and its re-derivation.

A Tinker learner step (forward-backward over the batch's datums, then an optimizer step) is billed per token
processed: every position of every datum, prompt and sampled alike (:func:`step_train_tokens`). The outer loop
charges it as a ``cost.settled`` of kind ``training`` per step (:mod:`handlers.training.meter`), so the run's
budget, the cross-run ledger and ``ait costs --by kind`` see it. Sampling is charged per agent turn by the
episode runner (kind ``episode``), at the model's input and output rates.

``ait replay --verify`` re-prices every training settlement priced with the packaged table's version from its
recorded token count and lists any that differ (one priced with another table is taken as recorded).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from engine.derive import register_deriver
from events import EventBody
from events.money import CostSettled
from handlers.budget.prices import PriceTable, UnknownPrice, load_prices

if TYPE_CHECKING:  # handlers.training imports the budget rules, which import this module
    from handlers.training.datums import DatumSpec

__all__ = ["OFFLINE_ITEM", "step_train_tokens", "training_usd"]

#: The price-table item of the offline learner (adapters/tinker/offline.py): it trains nothing and costs nothing.
OFFLINE_ITEM = "offline"


def step_train_tokens(datums: Sequence[DatumSpec]) -> int:
    """Tokens one forward-backward processes: every input position of every datum."""
    return sum(len(d.input_tokens) for d in datums)


def training_usd(prices: PriceTable, item: str, train_tokens: int) -> float:
    """USD for ``train_tokens`` trained on ``item``'s learner (its ``train_per_mtok``)."""
    return prices.llm_usd(item, input_tokens=0, train_tokens=train_tokens)


@functools.cache
def _packaged() -> PriceTable:
    return load_prices()


def _derive(body: EventBody, states: Mapping[str, Any]) -> EventBody:
    if not isinstance(body, CostSettled) or body.kind != "training" or body.estimated:
        return body
    prices = _packaged()
    if body.price_version != prices.label:
        return body  # priced with another table: nothing here to recompute it with
    try:
        usd = training_usd(prices, body.item, body.train_tokens)
    except UnknownPrice:
        return body
    return msgspec.structs.replace(body, usd=usd)


register_deriver(CostSettled, _derive)
