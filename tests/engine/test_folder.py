"""The one-pass Folder: what it folds equals each projection's own fold, and it counts every record by type."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from engine.projection import Folder
from events import Recorded, RunStarted

from .spine_model import body_for, fold_all, projections


def _records(positions: list[int]) -> list[Recorded]:
    # RunStarted: a type no test projection handles, still counted
    bodies = [RunStarted(run_id="run", seed=0, code_version="test") if n % 10 == 9 else body_for(n) for n in positions]
    return [Recorded(seq=i, ts=1000.0 + i, event=b) for i, b in enumerate(bodies)]


@given(st.lists(st.integers(0, 200), max_size=60), st.integers(1, 7))
def test_folding_in_blocks_equals_each_projections_own_fold(positions: list[int], block: int) -> None:
    records = _records(positions)
    projs = projections()
    folder = Folder(projs)
    states = [p.initial() for p in projs]
    for start in range(0, len(records), block):  # as a replay folds: block after block, one table throughout
        folder.fold(records[start : start + block], states)
    assert {p.name: s for p, s in zip(projs, states, strict=True)} == fold_all(projections(), records)
    assert folder.counts() == Counter(type(r.event) for r in records)
