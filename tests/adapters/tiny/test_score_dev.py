"""The dev-eval scorer (what a multi-job episode's ``job_result`` shows) runs with the key sealed and the hidden
set out of reach: it never touches either."""

from __future__ import annotations

import pytest

from families import EVAL_KEY_SEAL_ENV, EvalKeySealed, current_key, dev_eval_tasks, get_family
from tests.adapters.tiny.conftest import TINY_FIXTURES


def _no_hidden(*_a: object, **_k: object) -> None:
    raise AssertionError("the dev scorer reached the hidden set")


@pytest.mark.skipif(not (TINY_FIXTURES / "tiny-0.6b" / "model.safetensors").exists(), reason="no tiny checkpoint")
def test_score_dev_needs_neither_key_nor_hidden_set(monkeypatch: pytest.MonkeyPatch) -> None:
    import adapters.tiny.scorer as scorer
    from adapters.tiny.model import load_checkpoint

    ckpt = load_checkpoint("tiny-0.6b")
    monkeypatch.setattr(scorer, "hidden_tasks", _no_hidden)
    monkeypatch.setenv(EVAL_KEY_SEAL_ENV, "1")
    with pytest.raises(EvalKeySealed):
        current_key()
    with pytest.raises(AssertionError, match="hidden set"):
        scorer.score_hidden(ckpt, "calc_chain", limit=1)  # the targets really are blocked
    report = scorer.score_dev(ckpt, "calc_chain", limit=3)
    assert report.n == 3 and 0.0 <= report.score <= 1.0
    assert report.family == "calc_chain" and [t.id for t in dev_eval_tasks(get_family("calc_chain"), 3)]
