"""The machine's memo of base-model scores: a key that moves with every input a score depends on, and a store
that never serves a bad entry."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from adapters.tiny.score_memo import MEMO_ENV, ScoreMemo, memo_key
from adapters.tiny.specs import FIXTURE_DIR

if TYPE_CHECKING:
    from adapters.tiny.model import Checkpoint


def _key(checkpoint: Checkpoint, **change: object) -> str:
    args: dict[str, object] = {
        "split": "hidden",
        "family": "calc_chain",
        "temperature": 1.0,
        "seed": 0,
        "limit": 64,
    }
    args |= change
    return memo_key(checkpoint, **args)  # type: ignore[arg-type]


@pytest.fixture
def checkpoint(tmp_path: Path) -> Checkpoint:
    """A copy of a committed tiny checkpoint, loaded (its files and its weights may be changed here)."""
    from adapters.tiny.model import load_checkpoint

    return load_checkpoint(Path(shutil.copytree(FIXTURE_DIR / "tiny-0.6b", tmp_path / "ckpt")))


def test_the_key_names_the_weights_by_their_bytes_not_a_path(checkpoint: Checkpoint, tmp_path: Path) -> None:
    import torch

    from adapters.tiny.model import load_checkpoint

    first = _key(checkpoint)
    assert _key(checkpoint) == first
    assert checkpoint.path is not None
    copy = load_checkpoint(Path(shutil.copytree(checkpoint.path, tmp_path / "elsewhere")))
    assert _key(copy) == first  # the same bytes anywhere: the same score
    with torch.no_grad():
        weight = next(iter(checkpoint.model.parameters()))
        weight.view(-1)[0] = torch.nextafter(weight.view(-1)[0], torch.tensor(float("inf")))  # one ulp of one weight
    assert _key(checkpoint) != first  # weights as loaded: trained ones are keyed by what training made
    assert copy.path is not None
    (copy.path / "chat_template.jinja").write_text((copy.path / "chat_template.jinja").read_text() + " ")
    assert _key(copy) != first  # the prompt the model sees is part of the checkpoint


@pytest.mark.parametrize(
    "change",
    [
        {"split": "dev"},
        {"family": "ledger"},
        {"temperature": 0.7},
        {"seed": 1},
        {"limit": 32},
        {"limit": None},
    ],
    ids=lambda c: next(iter(c)),
)
def test_every_eval_setting_is_in_the_key(checkpoint: Checkpoint, change: dict[str, object]) -> None:
    assert _key(checkpoint, **change) != _key(checkpoint)


def test_the_key_counts_the_tasks_scored_not_the_limit_asked(checkpoint: Checkpoint) -> None:
    """`ait baselines` scores the whole hidden set (no limit); a job's task spec asks for eval.size = 200, the
    same tasks: one key. (A key per spelling made every `ait episode` pod score the base it had just frozen.)"""
    from families import DEV_EVAL_SIZE, HIDDEN_SIZE

    whole = _key(checkpoint, limit=None)
    assert _key(checkpoint, limit=HIDDEN_SIZE) == whole == _key(checkpoint, limit=HIDDEN_SIZE + 50)
    assert _key(checkpoint, limit=HIDDEN_SIZE - 1) != whole
    dev = _key(checkpoint, split="dev", limit=None)
    assert _key(checkpoint, split="dev", limit=DEV_EVAL_SIZE) == dev != _key(checkpoint, split="dev", limit=8)


def test_another_eval_key_is_another_hidden_set_and_another_key(
    checkpoint: Checkpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _key(checkpoint)
    monkeypatch.setenv("AIT_EVAL_KEY_FILE", str(tmp_path / "other.key"))  # created on first use: a new key
    assert _key(checkpoint) != before


def test_the_scoring_code_is_in_the_key(checkpoint: Checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.tiny import score_memo

    before = _key(checkpoint)
    monkeypatch.setattr(score_memo, "_code_fingerprint", lambda: "another version of adapters.tiny")
    assert _key(checkpoint) != before


def _report(score: float) -> object:
    from adapters.tiny.scorer import ScoreReport

    return ScoreReport(
        family="calc_chain", model="tiny-0.6b", score=score, n=2, rewards=[score, score], answered=1.0,
        temperature=1.0, top_p=1.0, max_tokens=96, max_turns=5, seed=0, seconds=1.5,
    )  # fmt: skip


def test_a_score_put_is_got_back_whole_and_an_off_memo_keeps_nothing(tmp_path: Path) -> None:
    memo = ScoreMemo(tmp_path / "memo")
    assert memo.get("ab" * 32) is None
    memo.put("ab" * 32, _report(0.25))  # type: ignore[arg-type]
    assert memo.get("ab" * 32) == _report(0.25)
    assert memo.get("cd" * 32) is None
    off = ScoreMemo(None)
    off.put("ab" * 32, _report(0.25))  # type: ignore[arg-type]
    assert off.get("ab" * 32) is None


def test_an_entry_that_does_not_decode_is_a_miss_and_is_written_again(tmp_path: Path) -> None:
    memo = ScoreMemo(tmp_path)
    memo.put("ab" * 32, _report(0.25))  # type: ignore[arg-type]
    (entry,) = tmp_path.rglob("*.json")
    entry.write_bytes(entry.read_bytes()[:-7])  # torn
    assert memo.get("ab" * 32) is None
    entry.write_text('{"score": "not a number"}')
    assert memo.get("ab" * 32) is None
    memo.put("ab" * 32, _report(0.5))  # type: ignore[arg-type]
    assert memo.get("ab" * 32) == _report(0.5)


def test_where_the_memo_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMO_ENV, str(tmp_path / "mine"))
    assert ScoreMemo.from_env().root == tmp_path / "mine"
    for off in ("off", "OFF", "0", "none"):
        monkeypatch.setenv(MEMO_ENV, off)
        assert ScoreMemo.from_env().root is None
    monkeypatch.delenv(MEMO_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ScoreMemo.from_env().root == tmp_path / "xdg" / "ait" / "scores"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ScoreMemo.from_env().root == tmp_path / "home" / ".cache" / "ait" / "scores"
