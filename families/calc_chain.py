"""calc_chain: chained integer arithmetic where each step's result feeds the next, via calculator tools.

Example prompt: ``Let p = 7, q = 12. Start with 23. Add p. Multiply by 3. Subtract q. What is the result?``
The model calls ``add(a=23, b=7)`` -> ``30``, ``mul(a=30, b=3)`` -> ``90``, ``sub(a=90, b=12)`` -> ``78``
and answers ``<answer>78</answer>``.

Knobs: ``steps`` = number of operations (1..8; default mix 2..5); ``distractors`` = named values that
are defined but never used (0..4; default mix 0..2). Values stay in 0..999 and divisions are exact, so
every intermediate result is a short non-negative integer (digits tokenise one per token).
Scoring: exact integer match (``normalise_number``); no partial credit, since a near miss is a wrong
answer for a chain.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

from ._answer import normalise_number
from ._base import Difficulty, SolverStep, Task, ToolBox, ToolError
from ._family import Draw, FamilyBase

__all__ = ["CalcChain"]

_NAMES = "pqrstuvwxyz"
_MAX = 999
_PHRASE = {"add": "Add {}.", "sub": "Subtract {}.", "mul": "Multiply by {}.", "div": "Divide by {}."}


def add(a: int, b: int) -> str:
    """Add two integers and return the sum.

    Args:
        a: the first number
        b: the number to add
    """
    return str(a + b)


def sub(a: int, b: int) -> str:
    """Subtract b from a and return the difference.

    Args:
        a: the number to subtract from
        b: the number to subtract
    """
    return str(a - b)


def mul(a: int, b: int) -> str:
    """Multiply two integers and return the product.

    Args:
        a: the first number
        b: the number to multiply by
    """
    return str(a * b)


def div(a: int, b: int) -> str:
    """Divide a by b and return the quotient (exact when b divides a).

    Args:
        a: the number to divide
        b: the number to divide by
    """
    if b == 0:
        raise ToolError("division by zero")
    return str(a // b) if a % b == 0 else f"{a / b:.6g}"


_APPLY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def _next_op(rng: random.Random, value: int) -> tuple[str, int]:
    """One operation whose result stays an integer in 0.._MAX."""
    choices: list[tuple[str, int]] = []
    k = rng.randint(1, 20)
    if value + k <= _MAX:
        choices.append(("add", k))
    if value - k >= 0:
        choices.append(("sub", k))
    m = rng.randint(2, 5)
    if value * m <= _MAX and value > 0:
        choices.append(("mul", m))
    divisors = [d for d in range(2, 6) if value % d == 0 and value > 0]
    if divisors:
        choices.append(("div", rng.choice(divisors)))
    return rng.choice(choices)


class CalcChain(FamilyBase):
    name: ClassVar[str] = "calc_chain"
    held_out: ClassVar[bool] = False
    steps_range: ClassVar[tuple[int, int]] = (1, 8)
    distractors_range: ClassVar[tuple[int, int]] = (0, 4)

    def default_difficulty(self, rng: random.Random) -> Difficulty:
        return Difficulty(steps=rng.randint(2, 5), distractors=rng.randint(0, 2))

    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        value = start = rng.randint(1, 50)
        ops: list[tuple[str, int]] = []
        for _ in range(difficulty.steps):
            op, k = _next_op(rng, value)
            ops.append((op, k))
            value = value // k if op == "div" else _APPLY[op](value, k)
        # Some operands (and maybe the start) are given as named values; distractors are extra names.
        names = rng.sample(_NAMES, len(_NAMES))
        variables: dict[str, int] = {}
        operands: list[int | str] = []
        for _, k in ops:
            if rng.random() < 0.35:
                var = names.pop()
                variables[var] = k
                operands.append(var)
            else:
                operands.append(k)
        start_ref: int | str = start
        if rng.random() < 0.25:
            start_ref = names.pop()
            variables[start_ref] = start
        for _ in range(difficulty.distractors):
            variables[names.pop()] = rng.randint(1, 50)
        order = sorted(variables)
        let = f"Let {', '.join(f'{v} = {variables[v]}' for v in order)}. " if order else ""
        steps = " ".join(_PHRASE[op].format(ref) for (op, _), ref in zip(ops, operands, strict=True))
        prompt = f"{let}Start with {start_ref}. {steps} What is the result?"
        world: dict[str, Any] = {
            "start": start_ref,
            "vars": {v: variables[v] for v in order},
            "ops": [[op, ref] for (op, _), ref in zip(ops, operands, strict=True)],
        }
        return prompt, world, str(value)

    def tools(self, task: Task) -> ToolBox:
        return ToolBox([add, sub, mul, div])

    def normalise(self, answer: str) -> str:
        return normalise_number(answer)

    def solve(self, task: Task) -> Sequence[SolverStep]:
        box = self.tools(task)
        variables: dict[str, int] = task.world["vars"]

        def resolve(ref: int | str) -> int:
            return variables[ref] if isinstance(ref, str) else ref

        value = resolve(task.world["start"])
        steps: list[SolverStep] = []
        for op, ref in task.world["ops"]:
            args = {"a": value, "b": resolve(ref)}
            result = box.call(op, args)
            steps.append(SolverStep(tool=op, arguments=args, result=result))
            value = int(result)
        steps.append(SolverStep(answer=str(value)))
        return steps
