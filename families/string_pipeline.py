"""string_pipeline: composed string transformations, each applied with a string tool.

Example prompt: ``Let s = "lamp", t = "ox". Start with s. Reverse it. Append t. Make it uppercase.
What is the final string?`` The model calls ``reverse(text="lamp")`` -> ``pmal``,
``append(text="pmal", suffix="ox")`` -> ``pmalox``, ``to_upper(text="pmalox")`` -> ``PMALOX`` and
answers ``<answer>PMALOX</answer>``.

Knobs: ``steps`` = pipeline length (1..8; default mix 2..5); ``distractors`` = named strings that are
defined but never used (0..4; default mix 0..2). Every operation changes the string and strings stay
1..14 letters, so the model must carry each exact intermediate into the next call.
Scoring: case-sensitive exact match after trimming whitespace and quotes; no partial credit (a string
off by one letter is a wrong pipeline).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ._base import Difficulty, SolverStep, Task, ToolBox, ToolError
from ._family import Draw, FamilyBase

__all__ = ["PHRASES", "StringPipeline"]

_MAX_LEN = 14
_NAMES = "stuvwxyz"
_WORDS = (
    "lamp", "ring", "cloud", "stone", "river", "apple", "night", "mint", "frog", "tiger", "plum", "window",
    "candle", "garden", "bread", "honey", "maple", "quilt", "rocket", "salt", "violet", "wagon", "yarn",
    "zebra", "acorn", "basket", "cedar", "delta", "ember", "falcon", "glove", "harbor", "island", "jungle",
    "kettle", "lemon", "meadow", "nectar", "orbit", "pepper", "quartz", "raven", "silver", "tulip",
    "urban", "velvet", "walnut",
)  # fmt: skip
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def reverse(text: str) -> str:
    """Reverse the order of the characters.

    Args:
        text: the string to reverse
    """
    return text[::-1]


def to_upper(text: str) -> str:
    """Convert every letter to uppercase.

    Args:
        text: the string to convert
    """
    return text.upper()


def to_lower(text: str) -> str:
    """Convert every letter to lowercase.

    Args:
        text: the string to convert
    """
    return text.lower()


def append(text: str, suffix: str) -> str:
    """Add suffix to the end of text.

    Args:
        text: the string to extend
        suffix: the string to add at the end
    """
    return text + suffix


def prepend(text: str, prefix: str) -> str:
    """Add prefix to the start of text.

    Args:
        text: the string to extend
        prefix: the string to add at the start
    """
    return prefix + text


def replace_char(text: str, old: str, new: str) -> str:
    """Replace every occurrence of the character old with the character new.

    Args:
        text: the string to change
        old: the single character to replace
        new: the single character to put in its place
    """
    if len(old) != 1 or len(new) != 1:
        raise ToolError("old and new must be single characters")
    return text.replace(old, new)


def take_first(text: str, n: int) -> str:
    """Keep only the first n characters.

    Args:
        text: the string to cut
        n: how many characters to keep
    """
    if n < 0:
        raise ToolError("n must be >= 0")
    return text[:n]


def drop_first(text: str, n: int) -> str:
    """Remove the first n characters.

    Args:
        text: the string to cut
        n: how many characters to remove
    """
    if n < 0:
        raise ToolError("n must be >= 0")
    return text[n:]


def rotate_left(text: str, n: int) -> str:
    """Move the first n characters to the end.

    Args:
        text: the string to rotate
        n: how many characters to move
    """
    if not text:
        return text
    n %= len(text)
    return text[n:] + text[:n]


_TOOLS: tuple[Callable[..., str], ...] = (
    reverse,
    to_upper,
    to_lower,
    append,
    prepend,
    replace_char,
    take_first,
    drop_first,
    rotate_left,
)
_BY_NAME = {fn.__name__: fn for fn in _TOOLS}


def _candidates(rng: random.Random, text: str) -> list[tuple[str, dict[str, Any]]]:
    """Operations that change ``text`` and keep it 1.._MAX_LEN characters long."""
    n = len(text)
    out: list[tuple[str, dict[str, Any]]] = []
    if text != text[::-1]:
        out.append(("reverse", {}))
    if text != text.upper():
        out.append(("to_upper", {}))
    if text != text.lower():
        out.append(("to_lower", {}))
    piece = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 3)))
    if n + len(piece) <= _MAX_LEN:
        out.append(("append", {"suffix": piece}))
        out.append(("prepend", {"prefix": piece}))
    old = rng.choice(text)
    new = rng.choice([c for c in _LETTERS if c != old.lower()])
    out.append(("replace_char", {"old": old, "new": new.upper() if old.isupper() else new}))
    if n >= 3:
        k = rng.randint(1, n - 2)
        out.append(("take_first", {"n": n - k}))
        out.append(("drop_first", {"n": k}))
    if n >= 2 and len(set(text)) > 1:
        k = rng.randint(1, n - 1)
        if text[k:] + text[:k] != text:
            out.append(("rotate_left", {"n": k}))
    return out


def _show(ref: Any) -> str:
    """A named value ("$t" in the world) is written bare, a literal string quoted, a number as is."""
    if isinstance(ref, str):
        return ref[1:] if ref.startswith("$") else f'"{ref}"'
    return str(ref)


PHRASES = {  # how a prompt says each operation (the tiny model's traces reuse it)
    "reverse": "Reverse it.",
    "to_upper": "Make it uppercase.",
    "to_lower": "Make it lowercase.",
    "append": "Append {suffix}.",
    "prepend": "Prepend {prefix}.",
    "replace_char": "Replace every {old} with {new}.",
    "take_first": "Keep the first {n} characters.",
    "drop_first": "Remove the first {n} characters.",
    "rotate_left": "Rotate it left by {n}.",
}


def _phrase(op: str, args: dict[str, Any]) -> str:
    text = PHRASES[op].format(**{k: _show(v) for k, v in args.items()})
    return text.replace(" 1 characters", " 1 character")


class StringPipeline(FamilyBase):
    name: ClassVar[str] = "string_pipeline"
    held_out: ClassVar[bool] = False
    steps_range: ClassVar[tuple[int, int]] = (1, 8)
    distractors_range: ClassVar[tuple[int, int]] = (0, 4)

    def default_difficulty(self, rng: random.Random) -> Difficulty:
        return Difficulty(steps=rng.randint(2, 5), distractors=rng.randint(0, 2))

    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        text = start = rng.choice(_WORDS)
        names = rng.sample(_NAMES, len(_NAMES))
        variables: dict[str, str] = {}
        ops: list[list[Any]] = []
        for _ in range(difficulty.steps):
            op, args = rng.choice(_candidates(rng, text))
            text = _BY_NAME[op](text, **args)
            # Appended/prepended pieces are sometimes given as named values ("$t" marks a reference).
            for key in ("suffix", "prefix"):
                if key in args and rng.random() < 0.4:
                    var = names.pop()
                    variables[var] = args[key]
                    args = {**args, key: f"${var}"}
            ops.append([op, args])
        start_ref = start
        if rng.random() < 0.3:
            var = names.pop()
            variables[var] = start
            start_ref = f"${var}"
        for _ in range(difficulty.distractors):
            variables[names.pop()] = rng.choice(_WORDS)[: rng.randint(2, 4)]
        order = sorted(variables)
        let = f"Let {', '.join(f'{v} = {_show(variables[v])}' for v in order)}. " if order else ""
        steps = " ".join(_phrase(op, args) for op, args in ops)
        prompt = f"{let}Start with {_show(start_ref)}. {steps} What is the final string?"
        world: dict[str, Any] = {"start": start_ref, "vars": {v: variables[v] for v in order}, "ops": ops}
        return prompt, world, text

    def tools(self, task: Task) -> ToolBox:
        return ToolBox(_TOOLS)

    def solve(self, task: Task) -> Sequence[SolverStep]:
        box = self.tools(task)
        variables: dict[str, str] = task.world["vars"]

        def resolve(ref: Any) -> Any:
            return variables[ref[1:]] if isinstance(ref, str) and ref.startswith("$") else ref

        text = resolve(task.world["start"])
        steps: list[SolverStep] = []
        for op, args in task.world["ops"]:
            call = {"text": text, **{k: resolve(v) for k, v in args.items()}}
            result = box.call(op, call)
            steps.append(SolverStep(tool=op, arguments=call, result=result))
            text = result
        steps.append(SolverStep(answer=text))
        return steps
