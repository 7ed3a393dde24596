"""The contract every task family implements.

A family is a seeded generator of tool-using tasks, the tools themselves as plain typed Python
functions (the "eval tool interface"), a scorer for a final reply, and a reference solver that solves
any task by calling the tools step by step, as a model would.

Tools are stateful per task for some families (``ledger`` balances change as the episode goes), so the
tools are built per task: ``family.tools(task)`` returns a fresh :class:`ToolBox` bound to that task's
world. A tool is a plain function with type hints and a docstring; its JSON schema is derived from them
(see ``_schema.py``). Tools take JSON-able arguments and return a short string: what the model sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import msgspec

from ._toolbox import ToolBox, ToolError

__all__ = [
    "Difficulty",
    "Family",
    "SolverRecorder",
    "SolverStep",
    "Task",
    "ToolBox",
    "ToolError",
]


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """One task. ``world`` holds everything the tools need (JSON-encodable); ``answer`` is the gold answer."""

    id: str  # "<family>/<split>/<seed>", unique across splits
    family: str
    prompt: str  # the user message; the shared system prompt is families.SYSTEM_PROMPT
    answer: str
    world: dict[str, Any] = {}
    difficulty: dict[str, int] = {}  # the knobs actually used (Difficulty fields)


class Difficulty(msgspec.Struct, frozen=True, kw_only=True):
    """Knobs every generator understands; a family may ignore what does not apply to it.

    ``None`` passed to ``generate`` means "the family's default mix" (what dev and hidden use).
    """

    steps: int = 3  # chain length / hops / pipeline length / operations / rules
    distractors: int = 2


class SolverStep(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One step of a reference solution: a tool call and what it returned, or the final answer."""

    tool: str | None = None
    arguments: dict[str, Any] = {}
    result: str | None = None
    answer: str | None = None


class SolverRecorder:
    """Drives a task's tools the way a model would and records each call as a :class:`SolverStep`."""

    def __init__(self, box: ToolBox) -> None:
        self.box = box
        self.steps: list[SolverStep] = []

    def call(self, tool: str, **arguments: Any) -> str:
        result = self.box.call(tool, arguments)
        self.steps.append(SolverStep(tool=tool, arguments=arguments, result=result))
        return result

    def answer(self, value: str) -> list[SolverStep]:
        self.steps.append(SolverStep(answer=value))
        return self.steps


class Family(Protocol):
    """What every family module exposes (as a class; ``families.get_family(name)`` instantiates it)."""

    name: ClassVar[str]
    held_out: ClassVar[bool]
    prompt_is_template: ClassVar[bool]  # the prompt alone does not identify a task (its world does)

    def generate(self, split: str, seed: int, difficulty: Difficulty | None = None) -> Task:
        """The task for (split, seed); same arguments, same task byte for byte. Train/dev never equal hidden."""
        ...

    def tools(self, task: Task) -> ToolBox:
        """Fresh tools bound to ``task`` (fresh state for stateful families)."""
        ...

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas of the tools (the same for every task of the family)."""
        ...

    def score(self, task: Task, reply: str) -> float:
        """Score the model's final reply (``<answer>X</answer>`` or the whole reply) in [0, 1]."""
        ...

    def solve(self, task: Task) -> Sequence[SolverStep]:
        """Reference solution: tool calls made on ``self.tools(task)`` with their results, then the answer."""
        ...
