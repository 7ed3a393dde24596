"""adapters.prime_rl.bootstrap: the pod bootstrap script names exactly the pins, and is valid bash."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from adapters.prime_rl import bootstrap, pins


def test_script_checks_out_the_pinned_revisions() -> None:
    text = bootstrap.bootstrap_script(bootstrap.BootstrapPaths("/opt/x y"))
    assert f"checkout --quiet {pins.PRIME_RL_COMMIT}" in text
    assert f"= {pins.VERIFIERS_COMMIT}" in text  # the submodule's commit is verified, not assumed
    assert "submodule update --init -- deps/verifiers deps/renderers deps/prime-envs deps/pydantic-config" in text
    assert "bin/python verifiers==0.4.0 msgspec" in text
    assert pins.pins_dict()["prime_rl"] == pins.PRIME_RL_COMMIT and pins.PRIME_RL_COMMIT in text
    assert "'/opt/x y/prime-rl'" in text  # paths are quoted
    assert 'insteadOf "git@github.com:"' in text


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n"], input=bootstrap.bootstrap_script(), text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_marker_changes_with_any_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    before = bootstrap.pins_fingerprint()
    monkeypatch.setattr(pins, "VERIFIERS_COMMIT", "0" * 40)
    assert bootstrap.pins_fingerprint() != before
