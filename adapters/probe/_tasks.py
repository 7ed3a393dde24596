"""The tasks check: enough tasks, a typed ``answer`` field, and no task equal to a hidden eval item.

The sandboxed child sends back every task's prompt and answer; the comparison with the family's hidden eval
happens here, in the engine process, so the hidden set never enters the sandbox. A task matches a hidden
item when its fingerprint (``families.fingerprint``: prompt and answer) equals one, or when its prompt and
answer equal a hidden item's after normalisation (case and whitespace). Where a family's prompt identifies
its task (calc_chain, string_pipeline, ledger), the prompt alone is enough: a hidden prompt with any answer
is a leak (an env can reward its own solver's answer). Where it does not (``prompt_is_template``: multi_hop,
dispatch, triage, whose answers live in the world the tools serve), honest train prompts equal hidden ones
verbatim, so only prompt *and* answer together count.
Near duplicates (a lightly edited hidden item with its answer) are caught by :mod:`._contamination`; the
check's detail then states the overlap figure. The hidden set depends on the installation key, so every
cache here is keyed by (family, key fingerprint).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import families
from families import key_fingerprint

from ._contamination import NEAR_JACCARD, HiddenShingles, near_duplicates

__all__ = ["hidden_index", "hidden_shingles", "judge_tasks", "match_key", "normalise_prompt"]


def normalise_prompt(text: str) -> str:
    return " ".join(text.casefold().split())


def hidden_index(family_name: str) -> tuple[frozenset[str], frozenset[str]]:
    """(fingerprints, normalised match keys) of the family's hidden eval set under the current key.

    A match key is the normalised prompt, or for a family whose prompts are templates the normalised prompt
    and answer (see :func:`match_key`).
    """
    return _hidden_index(family_name, key_fingerprint())


def match_key(family_name: str, prompt: str, answer: str | None) -> str:
    """What two tasks must share to count as the same item, beyond the exact fingerprint."""
    return _key(families.get_family(family_name).prompt_is_template, prompt, answer)


def _key(template: bool, prompt: str, answer: str | None) -> str:
    if not template:
        return normalise_prompt(prompt)
    return normalise_prompt(prompt) + "\x00" + ("" if answer is None else normalise_prompt(answer))


@functools.cache
def _hidden_index(family_name: str, fingerprint: str) -> tuple[frozenset[str], frozenset[str]]:
    family = families.get_family(family_name)
    keys = frozenset(match_key(family_name, t.prompt, t.answer) for t in families.hidden_tasks(family))
    return families.hidden_fingerprints(family), keys


def hidden_shingles(family_name: str) -> HiddenShingles:
    """The near-duplicate index of the family's hidden set under the current key."""
    return _hidden_shingles(family_name, key_fingerprint())


@functools.cache
def _hidden_shingles(family_name: str, fingerprint: str) -> HiddenShingles:
    tasks = families.hidden_tasks(families.get_family(family_name))
    return HiddenShingles([t.prompt for t in tasks], [t.answer for t in tasks])


def _fingerprint(family_name: str, prompt: str, answer: str) -> str:
    return families.fingerprint(families.Task(id="", family=family_name, prompt=prompt, answer=answer))


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def hidden_matches(family_name: str, items: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of the tasks equal to a hidden eval item."""
    fps, keys = hidden_index(family_name)
    template = families.get_family(family_name).prompt_is_template
    hits = []
    for i, item in enumerate(items):
        prompt = str(item.get("prompt") or "")
        answer = item.get("answer")
        if _key(template, prompt, None if answer is None else str(answer)) in keys or (
            answer is not None and _fingerprint(family_name, prompt, str(answer)) in fps
        ):
            hits.append(i)
    return hits


def judge_tasks(reply: dict[str, Any], family_name: str, min_tasks: int) -> tuple[bool, str]:
    """(ok, detail) for the child's ``load`` reply."""
    items: list[dict[str, Any]] = reply.get("items", [])
    count = len(items)
    problems: list[str] = []
    fields: dict[str, str] = reply.get("fields", {})
    data_types = reply.get("data_types", [])
    if count == 0:
        problems.append("load() returned no tasks")
    elif count < min_tasks and not reply.get("truncated"):
        problems.append(f"only {count} tasks; at least {min_tasks} are needed (set num_tasks or generate more)")
    if data_types == ["TaskData"] or (count and "answer" not in fields):
        problems.append(
            "the tasks' data type has no typed `answer` field: subclass vf.TaskData and declare "
            "`answer: str` (the gold answer each rollout is scored against)"
        )
    elif len(data_types) > 1:
        problems.append(f"load() yields several data types {data_types}; a taskset yields one task type")
    missing = [i for i, it in enumerate(items) if it.get("answer") in (None, "")]
    if missing and "answer" in fields:
        problems.append(f"{len(missing)} tasks have an empty answer (first: task #{missing[0]})")
    no_prompt = [i for i, it in enumerate(items) if not str(it.get("prompt") or "").strip()]
    if no_prompt:
        problems.append(f"{len(no_prompt)} tasks have an empty prompt (first: task #{no_prompt[0]})")
    hits = hidden_matches(family_name, items)
    if hits:
        shown = "; ".join(f"#{i} {_short(str(items[i].get('prompt')))!r}" for i in hits[:3])
        problems.append(
            f"{len(hits)} of {count} tasks equal items of the hidden eval set ({shown}); training on the eval "
            "set is not allowed: generate other tasks"
        )
    else:
        report = near_duplicates(hidden_shingles(family_name), items)
        if report.near:
            shown = "; ".join(
                f"#{k} {_short(str(items[k].get('prompt')))!r} (overlap {j:.2f})" for k, _, j in report.near[:3]
            )
            problems.append(
                f"contamination: {len(report.near)} of {count} tasks ({report.overlap:.2%}) are near duplicates of "
                f"hidden eval items (same answer, {NEAR_JACCARD:.0%}+ of the hidden prompt's 5-grams: {shown}); "
                "training on edited eval items is not allowed: generate other tasks"
            )
    scope = f"{count} tasks" + (" (the first ones of an endless taskset)" if reply.get("truncated") else "")
    if problems:
        return False, f"{scope}: " + " | ".join(problems)
    typed = ", ".join(f"{k}: {v}" for k, v in fields.items())
    return True, (
        f"{scope} loaded; data type {', '.join(data_types)} ({typed}); "
        "none equals a hidden eval item, none near one (overlap 0.00%)"
    )
