"""adapters.prime_rl.toml_writer: output that tomllib reads back to the same data, deterministically."""

from __future__ import annotations

import math
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.prime_rl.toml_writer import TomlWriteError, dumps

keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
values = st.recursive(
    st.one_of(scalars, st.lists(scalars, max_size=3)),
    lambda inner: st.one_of(
        st.dictionaries(keys, inner, max_size=4),
        st.lists(st.dictionaries(keys, inner, min_size=1, max_size=3), min_size=1, max_size=2),
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_round_trip(data: dict) -> None:
    assert tomllib.loads(dumps(data)) == data


def test_layout_scalars_first_then_tables_then_arrays() -> None:
    text = dumps(
        {"b": {"x": 1}, "a": 1.0, "s": [{"name": "n", "env": {"id": "e"}}], "empty": {}},
        header_comment=["line one", ""],
    )
    assert text == ('# line one\n#\n\na = 1.0\n\n[b]\nx = 1\n\n[empty]\n\n[[s]]\nname = "n"\n\n[s.env]\nid = "e"\n')


def test_keys_that_need_quotes_are_quoted() -> None:
    assert dumps({"a.b": 1, "c d": "x"}) == '"a.b" = 1\n"c d" = "x"\n'


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, {1, 2}, [1, {"a": 1}]])
def test_unwritable_values_name_their_key(bad: object) -> None:
    with pytest.raises(TomlWriteError, match=r"^t\.k"):
        dumps({"t": {"k": bad}})
