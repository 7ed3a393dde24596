"""The one-pass Folder: what it folds equals each projection's own fold, it counts every record by type, and it
skips setting ``current`` only for handlers that cannot read it."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.effects import EffectsProjection
from engine.folder import ANALYSED, Folder, reads_record
from engine.log import read_log
from engine.projection import Projection, handles
from events import (
    JobAssigned,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    PodCreated,
    PodIdle,
    PodLost,
    PodTerminated,
    Recorded,
    RunStarted,
)
from handlers.registry import default_projections
from views.snapshot import snapshot_views

from .spine_model import body_for, fold_all, projections

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "run"


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


def test_a_long_stream_folds_the_same_through_its_regenerated_orders() -> None:
    # 10,000 records from a generator: folded in chunks, the branches regenerated as new types come and put in
    # frequency order at 1,024 and 4,096 records; a block of one record at a time on the other side.
    records = _records(list(range(200)) * 50)
    projs = projections()
    folder = Folder(projs)
    states = [p.initial() for p in projs]
    folder.fold((r for r in records), states)
    assert {p.name: s for p, s in zip(projs, states, strict=True)} == fold_all(projections(), records)
    assert folder.counts() == Counter(type(r.event) for r in records)


def _real_projections() -> list[Projection[Any]]:
    """Every projection a runtime folds: the domain's, effects, and the dashboard's and report's own."""
    return [*default_projections(), EffectsProjection(), *snapshot_views()]


def test_the_real_projections_fold_the_golden_run_as_each_folds_it_alone() -> None:
    # The real handlers, whose record writes the Folder skips where reads_record says they never read it: each
    # projection's own fold sets ``current`` before every handler, so a handler wrongly judged not to read it
    # would see an older record's seq or ts here. The golden run's records share timestamps (937 for 2,650), so
    # each is stamped with its own: a stale record shows in any ts a handler keeps.
    records = [Recorded(r.seq, 1_000_000.0 + r.seq, r.event) for r in read_log(GOLDEN / "events.jsonl").records]
    assert len(records) > 2000
    for block in (1, 7, 64, len(records)):
        projs = _real_projections()
        folder, states = Folder(projs), [p.initial() for p in projs]
        for start in range(0, len(records), block):
            folder.fold(records[start : start + block], states)
        alone = [p.fold(records) for p in _real_projections()]
        encode = msgspec.json.Encoder(order="deterministic").encode
        assert [encode(s) for s in states] == [encode(s) for s in alone], block
    skipped = [(p.name, t.type) for p in projs for t in p._dispatch if not reads_record(p, p._dispatch[t])]
    assert ("queue", "job.progressed") in skipped and ("queue", "job.queued") not in skipped  # both kinds folded
    assert len(projs) > 12 and len({p.name for p in projs}) == len(projs)


class _Reads(Projection[list[float]]):
    """One handler per way a handler can reach ``self.current``, and one that cannot."""

    name = "t_reads"
    state_type = list[float]

    def __init__(self) -> None:
        self.seen: list[float] = []
        self.hook = self._helper

    def initial(self) -> list[float]:
        return []

    def _helper(self) -> float:
        return self.current.ts

    @property
    def _ts(self) -> float:
        return self.current.ts

    @staticmethod
    def _double(x: float) -> float:
        return 2 * x

    @handles(JobQueued)
    def direct(self, s: list[float], e: JobQueued) -> list[float]:
        return [*s, self.current.ts]

    @handles(JobStarted)
    def via_method(self, s: list[float], e: JobStarted) -> list[float]:
        return [*s, self._helper()]

    @handles(JobSucceeded)
    def via_property(self, s: list[float], e: JobSucceeded) -> list[float]:
        return [*s, self._ts]

    @handles(JobFailed)
    def passed_on(self, s: list[float], e: JobFailed) -> list[float]:
        return [*s, _ts_of(self)]

    @handles(JobProgressed)
    def in_a_lambda(self, s: list[float], e: JobProgressed) -> list[float]:
        return [*s, (lambda: self.current.ts)()]

    @handles(JobAssigned)
    def via_an_attribute(self, s: list[float], e: JobAssigned) -> list[float]:
        return [*s, self.hook()]

    # 3.13 loads two locals in one instruction (LOAD_FAST_LOAD_FAST, STORE_FAST_LOAD_FAST): ``self`` second, first,
    # and after a comprehension's variable (3.12 inlines comprehensions into the handler's own code)
    @handles(PodCreated)
    def passed_after_another(self, s: list[float], e: PodCreated) -> list[float]:
        return [*s, _ts_after(s, self)]

    @handles(PodIdle)
    def passed_before_another(self, s: list[float], e: PodIdle) -> list[float]:
        return [*s, _ts_before(self, s)]

    @handles(PodLost)
    def in_a_comprehension(self, s: list[float], e: PodLost) -> list[float]:
        return [*s, *[self._helper() for _ in range(1)]]

    @handles(PodTerminated)
    def in_a_comprehension_never(self, s: list[float], e: PodTerminated) -> list[float]:
        return [*s, *[self._double(x) for x in s[:1]]]

    @handles(JobRequeued)
    def never(self, s: list[float], e: JobRequeued) -> list[float]:
        self.seen.append(self._double(len(s)))
        return [*s, -1.0]


def _ts_of(p: _Reads) -> float:
    return p.current.ts


def _ts_after(s: list[float], p: _Reads) -> float:
    return p.current.ts


def _ts_before(p: _Reads, s: list[float]) -> float:
    return p.current.ts


def test_reads_record_follows_every_way_to_the_record_and_only_those() -> None:
    p = _Reads()
    judged = {h.__name__: reads_record(p, h) for h in type(p)._dispatch.values()}
    assert judged == {
        "direct": True,
        "via_method": True,
        "via_property": True,
        "passed_on": True,
        "in_a_lambda": True,
        "via_an_attribute": True,
        "passed_after_another": True,
        "passed_before_another": True,
        "in_a_comprehension": True,
        "in_a_comprehension_never": False,
        "never": False,
    }


def test_a_handler_that_reads_the_record_through_a_helper_gets_its_own_record() -> None:
    kinds = [
        JobQueued(job_id="j", episode_id="e", family="f", base_model="m", bundle="b"),
        JobStarted(job_id="j", pod_id="p"),
        JobSucceeded(job_id="j", pre=0.0, post=1.0, train_seconds=1.0),
        JobFailed(job_id="j", reason="r"),
        JobProgressed(job_id="j", step=1),
        JobAssigned(job_id="j", pod_id="p", key="k", attempt=1),
        JobRequeued(job_id="j", reason="r", attempt=1),
    ]
    records = [Recorded(seq=i, ts=100.0 + i, event=kinds[i % len(kinds)]) for i in range(50)]
    folder, states = Folder([_Reads()]), [[]]
    for start in range(0, len(records), 7):  # the first block by the slow path, the others by the generated one
        folder.fold(records[start : start + 7], states)
    assert states[0] == _Reads().fold(records)
    assert states[0][:6] == [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]  # each handler saw its own record


def test_on_another_python_every_handler_counts_as_reading_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _Reads()
    assert not reads_record(p, _Reads.never)  # the target is there on this interpreter
    monkeypatch.setattr(sys, "version_info", (3, 14, 0, "final", 0))  # LOAD_FAST_BORROW: not read yet
    assert reads_record(p, _Reads.never)


def test_this_python_is_one_whose_bytecode_is_read() -> None:
    # The project supports 3.11+; a Python outside ANALYSED folds correctly but slower (every record set), and the
    # tests above would fail on it: this says why, once.
    assert sys.version_info[:2] in ANALYSED, f"engine.folder.reads_record does not read {sys.version_info[:2]}"
