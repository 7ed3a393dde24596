"""Which [prime_rl] keys a job adopted: only optional keys moved off their defaults count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.episode.bundle import make_bundle
from views.report.jobtoml import choice_of_bundle, choice_of_toml, optional_defaults

BASE = '[prime_rl]\nmodel = "qwen3-1.7b"\nlearning_rate = 1e-5\nmax_steps = 20\nbatch_size = 64\ngroup_size = 8\n'


def test_the_template_defaults_are_not_adoption() -> None:
    text = (
        BASE + 'temperature = 1.0\noptimizer = "adamw"\nalgorithm = "grpo"\nscheduler = "constant"\nloss = "default"\n'
    )
    choice = choice_of_toml(text)
    assert choice.model == "qwen3-1.7b" and choice.adopted == {}


def test_changed_optional_keys_are_adopted_and_required_keys_never() -> None:
    choice = choice_of_toml(BASE.replace("1e-5", "3e-6") + 'temperature = 0.7\nscheduler = "cosine"\nlora_rank = 16\n')
    assert choice.adopted == {"lora_rank": 16, "scheduler": "cosine", "temperature": 0.7}


@given(st.sets(st.sampled_from(sorted(optional_defaults()))))
def test_adopted_is_exactly_the_keys_set_off_default(keys: set[str]) -> None:
    defaults = optional_defaults()
    lines = []
    for k, v in sorted(defaults.items()):
        value = v if k not in keys else (f"{v}x" if isinstance(v, str) else v + 1)
        lines.append(f'{k} = "{value}"' if isinstance(value, str) else f"{k} = {value}")
    assert set(choice_of_toml(BASE + "\n".join(lines) + "\n").adopted) == keys


def test_reads_the_job_toml_inside_a_bundle() -> None:
    bundle = make_bundle({"job.toml": (BASE + 'loss = "ipo"\n').encode(), "env/x.py": b""}, b"{}")
    assert choice_of_bundle(bundle).adopted == {"loss": "ipo"}


def test_bad_input_names_the_source() -> None:
    with pytest.raises(ValueError, match=r"ep-1:job\.toml: not valid TOML"):
        choice_of_toml("[prime_rl\n", "ep-1:job.toml")
    with pytest.raises(ValueError, match=r"no \[prime_rl\] table"):
        choice_of_toml("[env]\nid = 'x'\n")
    with pytest.raises(ValueError, match=r"bundle b1: no job\.toml"):
        choice_of_bundle(make_bundle({"env/x.py": b""}, b"{}"), "bundle b1")
    with pytest.raises(ValueError, match="not a tar archive"):
        choice_of_bundle(b"not a tar", "bundle b2")
