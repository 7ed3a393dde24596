"""The replica's choice space (handlers/episode/choice.py): every choice's job.toml parses, fits the replica's
task bounds, and reads back as the same choice; anything else is refused with the key named."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from families.spec import load_spec
from handlers.episode.choice import (
    FIXED,
    LEARNING_RATES,
    MODELS,
    RUBRICS,
    Choice,
    ChoiceError,
    all_choices,
    choice_of,
    job_text,
)
from handlers.episode.job_config import check_bounds, parse_job_config

ROOT = Path(__file__).resolve().parents[3]
SPEC = load_spec(ROOT / "examples" / "replica" / "tasks" / "calc_chain_v1_fast.json")


def test_all_choices_are_every_model_rubric_and_learning_rate_once() -> None:
    choices = all_choices()
    assert len(choices) == len(set(choices)) == len(MODELS) * len(RUBRICS) * len(LEARNING_RATES) == 16
    assert [c.label for c in choices[:4]] == [
        "0.6B/correct/1e-05",
        "0.6B/correct/3e-05",
        "0.6B/partial/1e-05",
        "0.6B/partial/3e-05",
    ]
    assert Choice("Qwen/Qwen3-1.7B", "wrong", "3e-05").label == "1.7B/wrong/3e-05"


@pytest.mark.parametrize("choice", all_choices(), ids=lambda c: c.label)
def test_job_text_round_trips_and_fits_the_bounds(choice: Choice) -> None:
    job = parse_job_config(job_text(choice, SPEC))
    assert choice_of(job) == choice
    assert check_bounds(job.prime_rl, SPEC.bounds) == []
    assert (job.env.id, job.env.path) == ("calc-chain-train", f"envs/{choice.rubric}")
    assert job.prime_rl.learning_rate == float(choice.learning_rate)


def test_jobs_differ_only_in_the_three_choice_lines() -> None:
    texts = [job_text(c, SPEC).splitlines() for c in all_choices()]
    varying = {i for i in range(len(texts[0])) if len({t[i] for t in texts}) > 1}
    assert [texts[0][i].split(" = ")[0] for i in sorted(varying)] == ["model", "learning_rate", "path"]
    fixed = {k: v for k, v in FIXED}
    job = parse_job_config(job_text(all_choices()[0], SPEC))
    assert job.prime_rl.max_steps == int(fixed["max_steps"])


def test_choice_of_names_the_key_it_refuses() -> None:
    good = job_text(Choice(MODELS[0], "correct", "1e-05"), SPEC)
    with pytest.raises(ChoiceError, match=r"\[env\]\.path = 'env'"):
        choice_of(parse_job_config(good.replace('path = "envs/correct"', 'path = "env"')))
    with pytest.raises(ChoiceError, match=r"\[prime_rl\]\.model"):
        choice_of(parse_job_config(good.replace(MODELS[0], "Qwen/Qwen3-8B")))
    # A trailing slash or a ./ is the same directory, the same choice.
    assert choice_of(parse_job_config(good.replace("envs/correct", "./envs/correct/"))).rubric == "correct"
    with pytest.raises(ChoiceError, match=r"\[prime_rl\]\.learning_rate = 2e-05"):
        choice_of(parse_job_config(good.replace("learning_rate = 1e-05", "learning_rate = 2e-05")))
    # The learning rate is a number: another spelling of 1e-05 is the same choice.
    assert choice_of(parse_job_config(good.replace("1e-05", "0.00001"))).learning_rate == "1e-05"
    with pytest.raises(ChoiceError):
        job_text(Choice("Qwen/Qwen3-8B", "correct", "1e-05"), SPEC)
    with pytest.raises(ChoiceError):
        job_text(Choice(MODELS[0], "correct", "1e-3"), SPEC)


def test_choice_is_a_frozen_hashable_struct() -> None:
    c = Choice(MODELS[1], RUBRICS[0], LEARNING_RATES[1])
    assert msgspec.json.decode(msgspec.json.encode(c), type=Choice) == c
    with pytest.raises(AttributeError):
        c.model = MODELS[0]  # type: ignore[misc]
