"""handlers.reward.baselines: freeze once, version the file, record events, refuse another key's baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.log import read_log
from engine.runtime import Runtime
from events import BaselineFrozen
from handlers.reward.baseline_projection import BaselinesProjection, best_pre
from handlers.reward.baselines import (
    BaselineEntry,
    BaselinesError,
    baseline_events,
    freeze_baselines,
    frozen_events,
    given_events,
    load_baselines,
    load_baselines_file,
    merge_events,
)


class FakeScorer:
    def __init__(self, scores: dict[tuple[str, str], float]) -> None:
        self.scores = scores
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, family: str, model: str) -> BaselineEntry:
        self.calls.append((family, model))
        return BaselineEntry(score=self.scores[(family, model)], n=200, sampling="T=1, n=200", seconds=0.5)


SCORES = {("calc_chain", "A"): 0.2, ("calc_chain", "B"): 0.35, ("ledger", "A"): 0.0, ("ledger", "B"): 0.1}


async def freeze(path: Path, scorer: FakeScorer, models=("A", "B"), emitted=None, **kw):
    async def emit(e: BaselineFrozen) -> None:
        if emitted is not None:
            emitted.append(e)

    return await freeze_baselines(
        scorer,
        families=["calc_chain", "ledger"],
        models=list(models),
        inner="cpu",
        out_path=path,
        created="2026-11-30",
        emit=emit,
        **kw,
    )


async def test_freeze_scores_each_pair_once_and_versions_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b" / "cpu.json"
    scorer, emitted = FakeScorer(SCORES), []
    f, scored = await freeze(path, scorer, models=("A",), emitted=emitted)
    assert scored == [("calc_chain", "A"), ("ledger", "A")] and f.version == 1
    assert [(e.family, e.model, e.score, e.n) for e in emitted] == [
        ("calc_chain", "A", 0.2, 200),
        ("ledger", "A", 0.0, 200),
    ]
    # Again: nothing to score, nothing changes.
    f2, scored2 = await freeze(path, scorer, models=("A",))
    assert scored2 == [] and f2 == f and len(scorer.calls) == 2
    # A new model: only its pairs are scored; one new version for the whole freeze.
    f3, scored3 = await freeze(path, scorer)
    assert scored3 == [("calc_chain", "B"), ("ledger", "B")] and f3.version == 2
    assert load_baselines(path) == {"calc_chain": {"A": 0.2, "B": 0.35}, "ledger": {"A": 0.0, "B": 0.1}}
    assert best_pre(load_baselines(path), "calc_chain") == 0.35 and best_pre({}, "ledger") is None
    # --force: everything again, a new version.
    f4, scored4 = await freeze(path, scorer, force=True)
    assert len(scored4) == 4 and f4.version == 3
    raw = json.loads(path.read_text())
    assert raw["format"] == 1 and raw["scores"]["calc_chain"]["B"]["sampling"] == "T=1, n=200"
    assert [p.name for p in path.parent.iterdir()] == ["cpu.json"]  # no temp files left


async def test_events_and_file_agree_through_the_runtime(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"
    async with Runtime(tmp_path / "log", [BaselinesProjection()]) as rt:
        await freeze_baselines(
            FakeScorer(SCORES),
            families=["calc_chain", "ledger"],
            models=["A", "B"],
            inner="cpu",
            out_path=path,
            created="2026-11-30",
            emit=rt.emit,
        )
        assert rt.state(BaselinesProjection) == load_baselines(path)
    # A run copies the frozen values into its own log: same state from the events alone.
    proj = BaselinesProjection()
    state = proj.initial()
    for e in baseline_events(load_baselines_file(path)):
        state = proj.apply(state, _rec(e))
    assert state == load_baselines(path)


def _rec(body: BaselineFrozen):
    from events import Recorded

    return Recorded(0, 0.0, body)


async def test_a_changed_key_or_inner_is_refused_loudly(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"
    await freeze(path, FakeScorer(SCORES), key_fingerprint="k1")
    with pytest.raises(BaselinesError, match="frozen under key 'k1', now 'k2'"):
        await freeze(path, FakeScorer(SCORES), key_fingerprint="k2")
    with pytest.raises(BaselinesError, match="not the current 'k2'"):
        load_baselines(path, key_fingerprint="k2")
    assert load_baselines(path, key_fingerprint="k1")["ledger"]["B"] == 0.1
    with pytest.raises(BaselinesError, match="holds 'cpu' baselines, not 'gpu'"):
        await freeze_baselines(
            FakeScorer(SCORES),
            families=["ledger"],
            models=["A"],
            inner="gpu",
            out_path=path,
            created="x",
            key_fingerprint="k1",
        )
    f, _ = await freeze(path, FakeScorer(SCORES), key_fingerprint="k2", force=True)
    assert f.key_fingerprint == "k2"


async def test_an_interrupted_freeze_keeps_what_it_scored(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"

    async def flaky(family: str, model: str) -> BaselineEntry:
        if family == "ledger":
            raise RuntimeError("server died")
        return BaselineEntry(score=0.5, n=10, sampling="s")

    with pytest.raises(RuntimeError):
        await freeze(path, flaky)  # type: ignore[arg-type]
    assert load_baselines(path) == {"calc_chain": {"A": 0.5, "B": 0.5}}
    _, scored = await freeze(path, FakeScorer(SCORES))
    assert scored == [("ledger", "A"), ("ledger", "B")]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{", "cpu.json: "),
        ('{"version": 1, "inner": "cpu", "created": "x", "extra": 1}', "unknown field"),
        ('{"format": 2, "version": 1, "inner": "cpu", "created": "x"}', "format 2"),
        (
            '{"version": 1, "inner": "cpu", "created": "x", '
            '"scores": {"f": {"m": {"score": 1.5, "n": 3, "sampling": ""}}}}',
            "scores.f.m",
        ),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "cpu.json"
    path.write_text(text)
    with pytest.raises(BaselinesError, match=error):
        load_baselines_file(path)


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.floats(0, 1), min_size=1))
def test_best_pre_is_the_max_frozen_score(scores: dict[str, float]) -> None:
    assert best_pre({"fam": scores}, "fam") == max(scores.values())


async def test_a_run_records_each_baseline_with_its_measured_n_and_key(tmp_path: Path) -> None:
    """open_run copies the file's entries as they were frozen (n, key fingerprint), not made-up values; a score
    given in a run config is marked as not measured (n = 0, no key) and takes precedence."""
    from handlers.budget.costs_ledger import CostsLedger
    from handlers.budget.rules import BudgetConfig, BudgetProjection
    from handlers.run.start import open_run

    path = tmp_path / "cpu.json"

    class Scorer(FakeScorer):
        async def __call__(self, family: str, model: str) -> BaselineEntry:
            return BaselineEntry(score=self.scores[(family, model)], n=64, sampling="T=1", seconds=0.1)

    await freeze(path, Scorer(SCORES), key_fingerprint="fp-1")
    with pytest.raises(BaselinesError, match="fp-1"):
        frozen_events(path, key_fingerprint="fp-2")
    events = merge_events(frozen_events(path, key_fingerprint="fp-1"), given_events({"ledger": {"B": 0.5}}))
    ledger = CostsLedger(tmp_path / "costs.jsonl")
    async with Runtime(tmp_path / "run", [BaselinesProjection(), BudgetProjection()]) as rt:
        await open_run(rt, seed=0, config={}, budget=BudgetConfig(), ledger=ledger, baselines=events)
        assert rt.state(BaselinesProjection)["ledger"]["B"] == 0.5
    recorded = [r.event for r in read_log(tmp_path / "run" / "events.jsonl").records]
    frozen = {(e.family, e.model): (e.n, e.key_fingerprint) for e in recorded if isinstance(e, BaselineFrozen)}
    assert frozen == {
        ("calc_chain", "A"): (64, "fp-1"),
        ("calc_chain", "B"): (64, "fp-1"),
        ("ledger", "A"): (64, "fp-1"),
        ("ledger", "B"): (0, ""),
    }
