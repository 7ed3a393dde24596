"""Near-duplicate contamination check: training tasks compared with the family's hidden eval set.

Exact matches (fingerprint or normalised prompt) are caught by :mod:`._tasks`; this catches a hidden item
that was lightly edited (reworded, a number reformatted, a sentence added) and kept its answer. A training
task is a *near duplicate* of a hidden item when their normalised answers are equal and at least
:data:`NEAR_JACCARD` of the hidden prompt's word 5-gram shingles occur in the task's prompt (containment,
so text added around a leaked item does not dilute it). The job's overlap figure
is the fraction of its tasks that are near duplicates; any near duplicate rejects the job.

Why answer equality plus a high threshold: every family's prompts share a template, so two honest tasks of
one family overlap a lot by shingles alone (Jaccard up to 0.8 for triage on the public train split, where many
prompts differ in a couple of words); what memorising a hidden item needs is its answer, and an honest
generator's tasks never reach 0.9 with the same answer (tests/adapters/probe/test_contamination.py measures
that on thousands of train tasks per family).

Speed: hidden shingles go into an inverted index; a training task's candidates are the hidden items sharing
a *rare* shingle (one in at most :data:`RARE_POSTINGS` hidden prompts), so the template's shingles, shared by
all, cost nothing; 20 000 tasks take well under a second per family. A task whose shingles are all
template ones (no rare shingle) cannot be near any single hidden item more than to all of them, and is not
a memorisation route.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

__all__ = ["NEAR_JACCARD", "RARE_POSTINGS", "ContaminationReport", "HiddenShingles", "near_duplicates", "shingles"]

NEAR_JACCARD = 0.9
RARE_POSTINGS = 8
_N = 5
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _norm_answer(answer: str) -> str:
    return " ".join(answer.casefold().split())


def shingles(text: str, n: int = _N) -> frozenset[str]:
    """Word n-grams of the case-folded text (punctuation kept as tokens); a short text is one shingle."""
    tokens = _TOKEN.findall(text.casefold())
    if len(tokens) <= n:
        return frozenset([" ".join(tokens)])
    return frozenset(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


class ContaminationReport(msgspec.Struct, frozen=True, kw_only=True):
    checked: int
    near: list[tuple[int, int, float]]  # (training task index, hidden item index, containment), worst first

    @property
    def overlap(self) -> float:
        """The fraction of the job's tasks that are near duplicates of a hidden item."""
        return len(self.near) / self.checked if self.checked else 0.0


class HiddenShingles:
    """The hidden prompts' shingles, answers and inverted index (built once per family and key)."""

    def __init__(self, prompts: Sequence[str], answers: Sequence[str]) -> None:
        self.sets = [shingles(p) for p in prompts]
        self.answers = [_norm_answer(a) for a in answers]
        postings: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(self.sets):
            for g in s:
                postings[g].append(i)
        # Only rare shingles nominate candidates: a template shingle is evidence of nothing.
        self.rare: dict[str, tuple[int, ...]] = {g: tuple(p) for g, p in postings.items() if len(p) <= RARE_POSTINGS}

    def best(self, prompt: str, answer: str) -> tuple[int, float]:
        """(hidden index, containment) of the closest hidden item with the same answer; (-1, 0.0) if none."""
        s = shingles(prompt)
        counts: Counter[int] = Counter()
        for g in s:
            hits = self.rare.get(g)
            if hits:
                counts.update(hits)
        want = _norm_answer(answer)
        best_i, best_j = -1, 0.0
        for i in counts:
            if self.answers[i] != want:
                continue
            other = self.sets[i]
            inter = len(s & other)
            j = inter / len(other)  # containment of the hidden item: added text does not dilute it
            if j > best_j:
                best_i, best_j = i, j
        return best_i, best_j


def near_duplicates(index: HiddenShingles, items: Sequence[dict[str, Any]]) -> ContaminationReport:
    """Every training task at or above :data:`NEAR_JACCARD` with a hidden item of the same answer."""
    near: list[tuple[int, int, float]] = []
    for k, item in enumerate(items):
        answer = item.get("answer")
        if answer is None:
            continue
        i, j = index.best(str(item.get("prompt") or ""), str(answer))
        if j >= NEAR_JACCARD:
            near.append((k, i, round(j, 3)))
    near.sort(key=lambda t: -t[2])
    return ContaminationReport(checked=len(items), near=near)
