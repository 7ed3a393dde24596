"""The price table: the packaged file loads, prices add up, and bad files are refused naming file and key."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.budget.prices import PriceTableError, UnknownPrice, load_prices

PACKAGED = load_prices()

GOOD = """\
version = 3
taken = 2026-11-30
[models.m]
provider = "openai"
input_per_mtok = 2.0
cached_input_per_mtok = 0.5
output_per_mtok = 8.0
aliases = ["m-alias"]
[gpus."NVIDIA A40"]
usd_per_hour = 0.5
aliases = ["A40"]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "prices.toml"
    p.write_text(text)
    return p


def test_packaged_table_prices_the_seed_models_and_gpus() -> None:
    assert PACKAGED.version >= 1
    assert isinstance(PACKAGED.taken, dt.date)
    assert PACKAGED.label.startswith(f"v{PACKAGED.version} (")
    for model in ("Qwen/Qwen3.6-35B-A3B", "qwen3.6-35b-a3b", "gpt-4.1", "scripted"):
        PACKAGED.model(model)
    for gpu in ("A40", "RTX 4090", "A5000", "A6000", "A100", "H100", "H200", "NVIDIA A40", "local"):
        assert PACKAGED.gpu(gpu).usd_per_hour >= 0
    # The embedded defaults must cost nothing, the real ones something.
    assert PACKAGED.llm_usd("scripted", input_tokens=10**6, output_tokens=10**6) == 0.0
    assert PACKAGED.gpu_usd("local", seconds=3600) == 0.0
    assert PACKAGED.gpu_usd("A40", seconds=3600) > 0


def test_llm_and_gpu_arithmetic(tmp_path: Path) -> None:
    t = load_prices(write(tmp_path, GOOD))
    # 1M prompt tokens of which 400k cached, 100k output: 0.6*2 + 0.4*0.5 + 0.1*8 = 2.2
    assert t.llm_usd("m", input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000) == (
        pytest.approx(2.2)
    )
    assert t.llm_usd("m-alias", input_tokens=1_000_000) == pytest.approx(2.0)
    assert t.gpu_usd("A40", seconds=1800, count=2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="cached_input_tokens"):
        t.llm_usd("m", input_tokens=10, cached_input_tokens=11)
    with pytest.raises(ValueError, match="count"):
        t.gpu_usd("A40", seconds=1, count=0)


@given(
    model=st.sampled_from(sorted(PACKAGED.models)),
    max_in=st.integers(0, 200_000),
    max_out=st.integers(0, 50_000),
    data=st.data(),
)
def test_a_reservation_at_llm_max_usd_covers_any_call_within_its_limits(
    model: str, max_in: int, max_out: int, data: st.DataObject
) -> None:
    used_in = data.draw(st.integers(0, max_in))
    cached = data.draw(st.integers(0, used_in))
    used_out = data.draw(st.integers(0, max_out))
    bound = PACKAGED.llm_max_usd(model, max_input_tokens=max_in, max_output_tokens=max_out)
    actual = PACKAGED.llm_usd(model, input_tokens=used_in, cached_input_tokens=cached, output_tokens=used_out)
    assert 0 <= actual <= bound + 1e-12
    # A cache hit never costs more than a miss.
    assert actual <= PACKAGED.llm_usd(model, input_tokens=used_in, output_tokens=used_out) + 1e-12


def test_unknown_names_say_which_table_and_what_is_known(tmp_path: Path) -> None:
    t = load_prices(write(tmp_path, GOOD))
    with pytest.raises(UnknownPrice, match=r"prices.toml: no price for model 'gpt-9'; known: \['m', 'm-alias'\]"):
        t.model("gpt-9")
    with pytest.raises(UnknownPrice, match="no price for GPU type 'TPU'"):
        t.gpu_usd("TPU", seconds=1)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace("output_per_mtok = 8.0", "output_per_mtok = -1"), 'models."m".output_per_mtok'),
        (lambda s: s.replace("output_per_mtok = 8.0", 'output_per_mtok = "8"'), 'models."m".output_per_mtok'),
        (lambda s: s.replace("output_per_mtok = 8.0\n", ""), "models.\"m\": missing key(s) ['output_per_mtok']"),
        (
            lambda s: s.replace("usd_per_hour = 0.5", "usd_per_hour = 0.5\nusd_per_day = 12"),
            "gpus.\"NVIDIA A40\": unknown key(s) ['usd_per_day']",
        ),
        (lambda s: s.replace("cached_input_per_mtok = 0.5", "cached_input_per_mtok = 3.0"), "columns swapped"),
        (lambda s: s.replace("taken = 2026-11-30", 'taken = "yesterday"'), "taken: expected a TOML date"),
        (lambda s: s.replace("version = 3", "version = 0"), "version: expected an integer >= 1"),
        (lambda s: s.replace("version = 3\n", ""), "top level: missing key(s) ['version']"),
        (lambda s: "colour = 1\n" + s, "top level: unknown key(s) ['colour']"),
        (lambda s: s + "\n[[oops", "not valid TOML"),
        (lambda s: s.replace('provider = "openai"', "provider = 3"), 'models."m".provider'),
        (lambda s: s.replace('aliases = ["A40"]', "aliases = [1]"), 'gpus."NVIDIA A40".aliases'),
        (lambda s: s.replace("[gpus.", "currency = 1\n[gpus."), "models.\"m\": unknown key(s) ['currency']"),
    ],
)
def test_bad_tables_are_refused_naming_file_and_key(tmp_path: Path, edit, message: str) -> None:
    path = write(tmp_path, edit(GOOD))
    with pytest.raises(PriceTableError) as info:
        load_prices(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_an_alias_used_by_two_entries_is_refused(tmp_path: Path) -> None:
    text = GOOD.replace("[gpus.", '[gpus."NVIDIA L4"]\nusd_per_hour = 0.4\naliases = ["A40"]\n[gpus.')
    with pytest.raises(PriceTableError, match="name 'A40' used by both"):
        load_prices(write(tmp_path, text))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PriceTableError, match=r"nope\.toml: cannot read"):
        load_prices(tmp_path / "nope.toml")
