"""The family registry: six names, triage held out, lazy lookup by the family's own name."""

from __future__ import annotations

import sys
import types

import pytest

import families
from families import FAMILIES, HELD_OUT_FAMILIES, TRAINING_FAMILIES, get_family


def test_registry_names():
    assert set(FAMILIES) == {"calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"}
    assert HELD_OUT_FAMILIES == ("triage",)
    assert set(TRAINING_FAMILIES) == set(FAMILIES) - {"triage"}


@pytest.mark.parametrize("name", ["calc_chain", "string_pipeline", "ledger"])
def test_get_family(name):
    family = get_family(name)
    assert family.name == name and family.held_out is False
    assert get_family(name) is not family  # a fresh instance each time


def test_unknown_family():
    with pytest.raises(KeyError, match="unknown family 'chess'"):
        get_family("chess")


def test_lookup_requires_exactly_one_matching_class(monkeypatch):
    module = types.ModuleType("families._fake_family")

    class Fake:
        name = "fake"
        held_out = False

    Fake.__module__ = module.__name__
    module.Fake = Fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(FAMILIES, "fake", module.__name__)
    monkeypatch.setitem(FAMILIES, "fake_held", module.__name__)
    families._family_class.cache_clear()
    try:
        assert isinstance(get_family("fake"), Fake)
        with pytest.raises(LookupError, match="expected one family class with name='fake_held', found 0"):
            get_family("fake_held")
        monkeypatch.setattr(Fake, "held_out", True)
        families._family_class.cache_clear()
        with pytest.raises(LookupError, match="held_out disagrees"):
            get_family("fake")
    finally:
        families._family_class.cache_clear()
