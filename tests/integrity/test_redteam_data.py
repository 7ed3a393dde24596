"""Red team, data routes (no sandbox needed): the public seed range and the dev examples do not reach the hidden set.

The brute-force attacker has the whole generator (an env may vendor a copy of ``families``) and the public seed
range of the hidden split, but not the installation key: it regenerates "hidden" seeds 0..199 the way the code
did before the key existed. Its tasks must match the real hidden set no more often than honest train tasks do.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from adapters.probe import hidden_matches, hidden_shingles, near_duplicates, scan_env
from families import HIDDEN_SIZE, FamilyBase, Task, dev_tasks, fingerprint, get_family, hidden_tasks

FAMILY = "calc_chain"


def _unkeyed_hidden(name: str, seed: int) -> Task:
    """The attacker's regeneration: the family's own draw, seeded as the split scheme without the key."""
    family = get_family(name)
    assert isinstance(family, FamilyBase)
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{name}|hidden|{seed}|0".encode()).digest()[:8], "big"))
    prompt, _world, answer = family.draw(rng, family.default_difficulty(rng))
    return Task(id=f"{name}/hidden/{seed}", family=name, prompt=prompt, answer=answer)


@pytest.mark.parametrize("name", ["calc_chain", "string_pipeline", "ledger"])
def test_brute_forcing_the_public_seed_range_without_the_key_matches_only_by_chance(name: str) -> None:
    hidden = {fingerprint(t) for t in hidden_tasks(get_family(name))}
    guesses = [_unkeyed_hidden(name, s) for s in range(HIDDEN_SIZE)]
    assert len({fingerprint(t) for t in guesses}) > HIDDEN_SIZE // 2  # a real regeneration, not a degenerate one
    hits = sum(fingerprint(t) in hidden for t in guesses)
    # The guesses may equal a hidden task at chance level, as any task from the same generator may; measure
    # chance with the same scheme on seeds outside the hidden range.
    chance = sum(fingerprint(t) in hidden for t in (_unkeyed_hidden(name, s) for s in range(10_000, 10_200)))
    assert hits <= max(3, 3 * chance)
    items = [{"prompt": t.prompt, "answer": t.answer} for t in guesses]
    # The contamination check finds (almost) nothing to object to: the guesses are just more honest-looking tasks.
    assert len(near_duplicates(hidden_shingles(name), items).near) <= hits


def test_the_unkeyed_scheme_is_what_the_attacker_would_have_got_before_the_key() -> None:
    # Guard for the test above: the attacker's seeding reproduces the real draw when the split is not keyed.
    family = get_family(FAMILY)
    assert isinstance(family, FamilyBase)
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{FAMILY}|train|5|0".encode()).digest()[:8], "big"))
    prompt, _world, answer = family.draw(rng, family.default_difficulty(rng))
    real = family.generate("train", 5)
    assert (prompt, answer) == (real.prompt, real.answer)


@pytest.mark.parametrize("name", ["calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch", "triage"])
def test_dev_examples_harvested_as_training_data_are_not_hidden_items(name: str) -> None:
    family = get_family(name)
    dev = dev_tasks(family)
    hidden = hidden_tasks(family)
    assert not {fingerprint(t) for t in dev} & {fingerprint(t) for t in hidden}
    assert not {t.prompt for t in dev} & {t.prompt for t in hidden}
    items = [{"prompt": t.prompt, "answer": t.answer} for t in dev]
    # Training on the dev examples is allowed (they are public) and does not look like contamination.
    assert near_duplicates(hidden_shingles(name), items).near == []
    assert hidden_matches(name, items) == []


def test_a_static_import_of_families_is_reported_with_its_line(tmp_path: Path) -> None:
    env = tmp_path / "env" / "pkg"
    env.mkdir(parents=True)
    (env / "__init__.py").write_text("import os\nfrom families import hidden_tasks, get_family\n")
    findings, scanned = scan_env(tmp_path, "env")
    assert scanned == 1 and any("__init__.py:2" in f and "families" in f for f in findings)
