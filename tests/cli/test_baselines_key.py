"""Baselines are tied to the eval key: frozen under its fingerprint, refused loudly once the key changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import episode_wiring, main
from families import EVAL_KEY_ENV as ENV_VAR
from families import key_fingerprint
from families.spec import BASE_MODELS
from handlers.reward.baselines import default_baselines_path
from tests.fakes import fake_cpu_baselines


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
    baselines, desc = episode_wiring._baselines("cpu", "ledger")
    assert baselines["ledger"] and desc == str(out)
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "other.key"))
    with pytest.raises(SystemExit, match=r"ait baselines --inner cpu --force"):
        episode_wiring._baselines("cpu", "ledger")
    assert len(fake_cpu) == 2  # the refusal scored nothing


def test_an_episode_freezes_the_missing_cpu_baselines_of_its_family_once(fake_cpu: list) -> None:
    baselines, desc = episode_wiring._baselines("cpu", "calc_chain")
    assert sorted(fake_cpu) == [("calc_chain", m) for m in sorted(BASE_MODELS)]
    assert baselines["calc_chain"] == dict.fromkeys(BASE_MODELS, 0.25) and "frozen now" in desc
    again, desc = episode_wiring._baselines("cpu", "calc_chain")
    assert again == baselines and len(fake_cpu) == 2 and "frozen now" not in desc  # frozen means frozen
    assert episode_wiring._baselines("standin", "calc_chain")[0] == {}  # made-up scores get no baseline
