"""A base class that implements the shared parts of the Family contract.

A family subclasses :class:`FamilyBase` and writes only what is its own: the default difficulty mix,
one draw from a seeded ``random.Random``, its tools, its reference solver and (optionally) how answers
are normalised. Split handling, hidden-set disjointness, ids, schemas and scoring come from here.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ._answer import extract_answer, normalise_text
from ._base import Difficulty, SolverStep, Task, ToolBox
from ._sets import hidden_fingerprints
from ._splits import draw_disjoint

__all__ = ["Draw", "FamilyBase"]

Draw = tuple[str, dict[str, Any], str]  # (prompt, world, answer)


class FamilyBase(ABC):
    name: ClassVar[str]
    held_out: ClassVar[bool] = False
    # True when tasks share prompt texts and differ in their world (the tools' data): the prompt alone does
    # not identify a task, so honest train prompts can equal hidden ones verbatim (the contamination check
    # then compares prompt and answer, not the prompt alone).
    prompt_is_template: ClassVar[bool] = False
    # Inclusive bounds of the knobs this family accepts; generate() rejects anything outside.
    steps_range: ClassVar[tuple[int, int]] = (1, 8)
    distractors_range: ClassVar[tuple[int, int]] = (0, 4)

    @abstractmethod
    def default_difficulty(self, rng: random.Random) -> Difficulty:
        """The difficulty mix used when none is given (dev, hidden, and train by default)."""

    @abstractmethod
    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        """One task's (prompt, world, answer), using only ``rng`` for randomness."""

    @abstractmethod
    def tools(self, task: Task) -> ToolBox: ...

    @abstractmethod
    def solve(self, task: Task) -> Sequence[SolverStep]: ...

    def normalise(self, answer: str) -> str:
        """How an answer is normalised before exact comparison (case-preserving by default)."""
        return normalise_text(answer)

    def check_difficulty(self, difficulty: Difficulty) -> None:
        for knob, (lo, hi) in (("steps", self.steps_range), ("distractors", self.distractors_range)):
            value = getattr(difficulty, knob)
            if not lo <= value <= hi:
                raise ValueError(f"{self.name}: difficulty.{knob}={value} is outside [{lo}, {hi}]")

    def generate(self, split: str, seed: int, difficulty: Difficulty | None = None) -> Task:
        if seed < 0:
            raise ValueError(f"{self.name}: seed must be >= 0, got {seed}")
        if difficulty is not None:
            self.check_difficulty(difficulty)

        def one(rng: random.Random) -> Task:
            diff = difficulty if difficulty is not None else self.default_difficulty(rng)
            prompt, world, answer = self.draw(rng, diff)
            return Task(
                id=f"{self.name}/{split}/{seed}",
                family=self.name,
                prompt=prompt,
                answer=answer,
                world=world,
                difficulty={"steps": diff.steps, "distractors": diff.distractors},
            )

        return draw_disjoint(one, self.name, split, seed, lambda: hidden_fingerprints(self))

    def tool_schemas(self) -> list[dict[str, Any]]:
        # Every task of a family has the same tool signatures, so any task's toolbox describes them.
        return self.tools(self.generate("hidden", 0)).schemas()

    def score(self, task: Task, reply: str) -> float:
        """1.0 for a normalised exact match of the extracted answer, else 0.0 (no partial credit)."""
        return float(self.normalise(extract_answer(reply)) == self.normalise(task.answer))
