"""Baselines are tied to the eval key: frozen under its fingerprint, refused loudly once the key changes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from cli import episode_wiring, main
from events import BaselineFrozen
from families import EVAL_KEY_ENV as ENV_VAR
from families import key_fingerprint
from families.spec import BASE_MODELS
from handlers.reward.baselines import default_baselines_path, scores_of
from tests.fakes import fake_cpu_baselines


def _baselines(
    trainer: str, family: str, models: list[str] | None = None, options: dict[str, str] | None = None
) -> tuple[list[BaselineFrozen], str]:
    quiet = Console(file=io.StringIO())
    return episode_wiring._baselines(trainer, family, models or list(BASE_MODELS), options or {}, quiet)


@pytest.fixture
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    return fake_cpu_baselines(monkeypatch, lambda model: 0.25)


def test_a_changed_key_invalidates_frozen_baselines_until_force(
    tmp_path: Path, fake_cpu: list, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cpu.json"
    argv = ["--runs-root", str(tmp_path / "runs"), "baselines", "--family", "calc_chain", "--out", str(out)]
    assert main(argv) == 0
    first = key_fingerprint()
    assert json.loads(out.read_text())["key_fingerprint"] == first

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "new.key"))  # a new installation key
    assert key_fingerprint() != first
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"frozen under eval key {first!r}" in err and "ait baselines --inner cpu --force" in err
    assert len(fake_cpu) == 2  # nothing scored against the wrong hidden set

    assert main([*argv, "--force"]) == 0
    data = json.loads(out.read_text())
    assert data["key_fingerprint"] == key_fingerprint() and data["version"] == 2
    assert len(fake_cpu) == 4


def test_an_episode_refuses_baselines_of_another_key(
    tmp_path: Path, fake_cpu: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["--runs-root", str(tmp_path / "runs"), "baselines", "--family", "ledger"]) == 0
    out = default_baselines_path("cpu")  # the default file, under $AIT_BASELINES_DIR in tests
    assert json.loads(out.read_text())["key_fingerprint"] == key_fingerprint()
    baselines, desc = _baselines("cpu", "ledger")
    assert scores_of(baselines)["ledger"] and desc == str(out)
    assert {(b.n, b.key_fingerprint) for b in baselines} == {(200, key_fingerprint())}  # as frozen, not made up
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "other.key"))
    with pytest.raises(SystemExit, match=r"ait baselines --inner cpu --force"):
        _baselines("cpu", "ledger")
    assert len(fake_cpu) == 2  # the refusal scored nothing


def test_an_episode_freezes_the_missing_cpu_baselines_of_its_family_once(fake_cpu: list) -> None:
    baselines, desc = _baselines("cpu", "calc_chain")
    assert sorted(fake_cpu) == [("calc_chain", m) for m in sorted(BASE_MODELS)]
    assert scores_of(baselines)["calc_chain"] == dict.fromkeys(BASE_MODELS, 0.25) and "frozen now" in desc
    again, desc = _baselines("cpu", "calc_chain")
    assert again == baselines and len(fake_cpu) == 2 and "frozen now" not in desc  # frozen means frozen
    assert _baselines("standin", "calc_chain")[0] == []  # made-up scores get no baseline


def test_a_smoke_eval_subset_gets_its_own_baselines_on_the_same_subset(fake_cpu: list) -> None:
    """eval_limit=32 scores post on 32 hidden tasks: best_pre is frozen on those 32, in a file of its own."""
    full, _ = _baselines("cpu", "calc_chain", models=["Qwen/Qwen3-0.6B"])
    assert [e.n for e in full] == [200] and fake_cpu == [("calc_chain", "Qwen/Qwen3-0.6B")]
    subset, desc = _baselines("cpu", "calc_chain", models=["Qwen/Qwen3-0.6B"], options={"eval_limit": "32"})
    assert [e.n for e in subset] == [32] and "cpu-n32.json" in desc and len(fake_cpu) == 2
    assert json.loads(default_baselines_path("cpu").read_text())["scores"]["calc_chain"]["Qwen/Qwen3-0.6B"]["n"] == 200


def test_only_the_models_the_spec_allows_are_frozen_and_compared_with(fake_cpu: list) -> None:
    baselines, _ = _baselines("cpu", "calc_chain", models=["Qwen/Qwen3-0.6B"])
    assert fake_cpu == [("calc_chain", "Qwen/Qwen3-0.6B")] and [e.model for e in baselines] == ["Qwen/Qwen3-0.6B"]
