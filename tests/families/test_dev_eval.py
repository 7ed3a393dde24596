"""The dev eval of multi-job episodes (split ``dev``, seeds ``DEV_EVAL_START..+DEV_EVAL_SIZE``), checked like the
other splits: disjoint from the hidden set, the train split and the dev examples the agent holds; built in a
sealed process (no key, no hidden set) it is the same set, so scoring it there needs neither."""

from __future__ import annotations

import msgspec
import pytest

from families import (
    DEV_EVAL_SIZE,
    DEV_EVAL_START,
    DEV_SIZE,
    EVAL_KEY_SEAL_ENV,
    TRAINING_FAMILIES,
    EvalKeySealed,
    Task,
    current_key,
    dev_eval_tasks,
    dev_tasks,
    fingerprint,
    get_family,
    hidden_fingerprints,
    hidden_tasks,
)

TRAIN_SEEDS = 500


def _whole(task: Task) -> bytes:
    return msgspec.json.encode([task.prompt, task.world, task.answer], order="deterministic")


@pytest.mark.parametrize("name", TRAINING_FAMILIES)
def test_dev_eval_is_disjoint_from_hidden_train_and_dev_examples(name: str) -> None:
    family = get_family(name)
    tasks = dev_eval_tasks(family)
    assert len(tasks) == DEV_EVAL_SIZE and DEV_EVAL_START >= DEV_SIZE
    assert [t.id for t in tasks] == [f"{name}/dev/{DEV_EVAL_START + i}" for i in range(DEV_EVAL_SIZE)]
    fps = {fingerprint(t) for t in tasks}
    assert len(fps) > DEV_EVAL_SIZE * 0.9  # a set of distinct tasks, not a few repeated
    assert not fps & hidden_fingerprints(family)
    if not getattr(family, "prompt_is_template", False):  # template prompts repeat verbatim across splits
        assert not {t.prompt for t in tasks} & {t.prompt for t in hidden_tasks(family)}
    # Against train and the dev examples, whole tasks (prompt, world, answer): a template family's (prompt, answer)
    # repeats across any large draw, its world is what makes a task.
    whole = {_whole(t) for t in tasks}
    assert not whole & {_whole(family.generate("train", s)) for s in range(TRAIN_SEEDS)}
    assert not whole & {_whole(t) for t in dev_tasks(family)}


@pytest.mark.parametrize("name", TRAINING_FAMILIES)
def test_a_sealed_process_builds_the_same_dev_eval_without_the_key(name: str, monkeypatch) -> None:
    family = get_family(name)
    keyed = dev_eval_tasks(family, 16)
    monkeypatch.setenv(EVAL_KEY_SEAL_ENV, "1")
    with pytest.raises(EvalKeySealed):
        current_key()  # the target is gone: nothing below can reach the key or the hidden set
    assert dev_eval_tasks(family, 16) == keyed


def test_limit_cuts_the_set() -> None:
    family = get_family("calc_chain")
    assert dev_eval_tasks(family, 4) == dev_eval_tasks(family)[:4]
    assert dev_eval_tasks(family, 0) == ()
