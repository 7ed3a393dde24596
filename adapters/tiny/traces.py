"""Supervised traces for pre-training the tiny models: reference solutions, some with one realistic mistake.

A clean trace is the family's reference solution as a chat: system prompt, the task, one assistant tool
call per step (after a short note quoting the instruction it carries out, see :mod:`.thoughts`) with the
tool's result, then ``<answer>X</answer>``. A noisy trace makes exactly one
mistake and stays self-consistent after it: the mistake is made by solving a slightly *different* task
(an operand off by a little, a wrong operation, a skipped step, a wrong relation or account) with the
real tools, while the conversation still shows the original prompt; or the last reply misreads the
final result. A model trained on a mix reproduces mistakes at about the mixed rate when it samples, so
its base is partial at temperature 1 and a policy-gradient trainer has something to fix.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

import msgspec

from families import SYSTEM_PROMPT, Family, SolverStep, Task

from .thoughts import notes_for

__all__ = [
    "NOISE_FAMILIES",
    "Trace",
    "noisy_steps",
    "noisy_trace",
    "reference_trace",
    "solution_messages",
    "trace_messages",
]

Perturb = Callable[[Task, random.Random], Task]


def solution_messages(
    task: Task, steps: Sequence[SolverStep], notes: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The chat a model produces when it follows ``steps`` (OpenAI message dicts), a note before each call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.prompt},
    ]
    n = 0
    for step in steps:
        if step.tool is not None:
            call = {"name": step.tool, "arguments": json.dumps(step.arguments, ensure_ascii=False)}
            messages.append(
                {
                    "role": "assistant",
                    "content": notes[n] if notes is not None else "",
                    "tool_calls": [{"id": f"call_{n}", "type": "function", "function": call}],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": f"call_{n}", "name": step.tool, "content": step.result or ""}
            )
            n += 1
        elif step.answer is not None:
            # A family whose notes go one past the calls writes its last note before the answer.
            lead = f"{notes[n]}\n" if notes is not None and len(notes) > n else ""
            messages.append({"role": "assistant", "content": f"{lead}<answer>{step.answer}</answer>"})
    return messages


def _with_world(task: Task, **changes: Any) -> Task:
    return msgspec.structs.replace(task, world={**task.world, **changes})


def _nudge(rng: random.Random, value: int, low: int = 1) -> int:
    """An integer near ``value`` (off by 1..3), never below ``low`` and never equal."""
    options = [value + d for d in (-3, -2, -1, 1, 2, 3) if value + d >= low]
    return rng.choice(options)


def _calc(task: Task, rng: random.Random) -> Task:
    ops = [list(op) for op in task.world["ops"]]
    variables: dict[str, int] = task.world["vars"]
    kind = rng.choice(("operand", "operand", "op", "skip", "start"))
    i = rng.randrange(len(ops))
    if kind == "start":
        start = task.world["start"]
        value = variables[start] if isinstance(start, str) else start
        return _with_world(task, start=_nudge(rng, value))
    if kind == "skip" and len(ops) > 1:
        del ops[i]
    elif kind == "op":
        ops[i][0] = rng.choice([o for o in ("add", "sub", "mul") if o != ops[i][0]])
    else:
        ref = ops[i][1]
        value = variables[ref] if isinstance(ref, str) else ref
        unused = [v for v in variables if v != ref]
        ops[i][1] = rng.choice(unused) if unused and rng.random() < 0.4 else _nudge(rng, value)
    return _with_world(task, ops=ops)


def _strings(task: Task, rng: random.Random) -> Task:
    ops = [[op, dict(args)] for op, args in task.world["ops"]]
    i = rng.randrange(len(ops))
    op, args = ops[i]
    kind = rng.choice(("arg", "arg", "op", "skip"))
    if kind == "skip" and len(ops) > 1:
        del ops[i]
    elif kind == "op" or not args:
        swaps = {"append": ("prepend", "suffix", "prefix"), "prepend": ("append", "prefix", "suffix")}
        if op in swaps:
            new_op, old_key, new_key = swaps[op]
            ops[i] = [new_op, {new_key: args[old_key]}]
        else:
            ops[i][0] = rng.choice([o for o in ("reverse", "to_upper", "to_lower") if o != op])
    else:
        key = rng.choice(sorted(args))
        value = args[key]
        if isinstance(value, int):
            args[key] = _nudge(rng, value, low=0)
        elif len(value) == 1:
            args[key] = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != value])
        else:
            args[key] = value[:-1] if len(value) > 1 else value + "s"
    return _with_world(task, ops=ops)


def _ledger(task: Task, rng: random.Random) -> Task:
    ops = [list(op) for op in task.world["ops"]]
    accounts = sorted(task.world["balances"])
    i = rng.randrange(len(ops))
    kind = rng.choice(("amount", "amount", "account", "skip", "target"))
    if kind == "target":
        return _with_world(task, target=rng.choice([a for a in accounts if a != task.world["target"]]))
    if kind == "skip" and len(ops) > 1:
        del ops[i]
    elif kind == "account":
        j = rng.randrange(1, len(ops[i]) - 1)
        ops[i][j] = rng.choice([a for a in accounts if a != ops[i][j]])
    else:
        ops[i][-1] = max(5, ops[i][-1] + rng.choice((-10, -5, 5, 10)))
    return _with_world(task, ops=ops)


_PERSON_RELS = ("friend", "mentor", "rival")


def _hops(task: Task, rng: random.Random) -> Task:
    # The reference solver reads the question, so the mistake is a misread question: one relation
    # swapped for another, or the anchor person swapped for someone else.
    prompt = task.prompt
    rels = [m for m in re.finditer(r"\b(friend|mentor|rival)\b", prompt)]
    if rels and rng.random() < 0.7:
        m = rng.choice(rels)
        new = rng.choice([r for r in _PERSON_RELS if r != m.group(1)])
        prompt = prompt[: m.start()] + new + prompt[m.end() :]
    else:
        people = sorted(task.world["people"])
        anchor = re.search(r"of (\w+)\?$", prompt)
        if anchor is None or anchor.group(1) not in people:
            return task
        new_name = rng.choice([p for p in people if p != anchor.group(1)])
        prompt = prompt[: anchor.start(1)] + new_name + prompt[anchor.end(1) :]
    return msgspec.structs.replace(task, prompt=prompt)


NOISE_FAMILIES: dict[str, Perturb] = {
    "calc_chain": _calc,
    "string_pipeline": _strings,
    "ledger": _ledger,
    "multi_hop": _hops,
}
# Families whose tools may legitimately reject a call as part of a correct solution.
_ERRORS_ALLOWED = frozenset({"ledger"})


def _wrong_answer(task: Task, steps: list[SolverStep], rng: random.Random) -> list[SolverStep] | None:
    """The same calls, but the final reply misreads: a nearby number, an earlier result, another name."""
    answer = steps[-1].answer or ""
    results = [s.result for s in steps if s.result]
    candidates: list[str] = []
    if re.fullmatch(r"-?\d+", answer):
        # A number misread: off by a little, or another number the tools showed.
        candidates.append(str(int(answer) + rng.choice((-2, -1, 1, 2))))
        candidates += [n for r in results for n in re.findall(r"-?\d+", r)]
    elif results:
        words = re.findall(r"[A-Za-z][A-Za-z0-9-]*", results[-1])
        candidates += [w for w in words if w[0].isupper()]
        candidates += [r for r in results[:-1] if "\n" not in r and len(r) < 20]
    candidates = [c for c in candidates if c != answer]
    if not candidates:
        return None
    return [*steps[:-1], SolverStep(answer=rng.choice(candidates))]


Trace = tuple[list[SolverStep], list[str] | None]


def reference_trace(family: Family, task: Task, note_families: Collection[str] | None = None) -> Trace:
    """The reference solution and its notes (none unless the family is in ``note_families``, if given)."""
    steps = list(family.solve(task))
    return steps, notes_for(family.name, task, steps, note_families)


def noisy_trace(
    family: Family, task: Task, rng: random.Random, tries: int = 8, note_families: Collection[str] | None = None
) -> Trace:
    """A solution with exactly one mistake whose answer is wrong (falls back to the clean solution)."""
    clean, clean_notes = reference_trace(family, task, note_families)
    perturb = NOISE_FAMILIES.get(family.name)
    for _ in range(tries):
        if perturb is None or rng.random() < 0.3:
            # A note before the answer would state the right one: the misread answer goes without it.
            calls = sum(s.tool is not None for s in clean)
            steps, notes = _wrong_answer(task, clean, rng), None if clean_notes is None else clean_notes[:calls]
        else:
            try:
                solved = perturb(task, rng)
                steps = list(family.solve(solved))
                notes = notes_for(family.name, solved, steps, note_families)
            except (KeyError, ValueError, IndexError):  # the misread question names nothing real
                continue
            if family.name not in _ERRORS_ALLOWED and any((s.result or "").startswith("error") for s in steps):
                continue
        if steps is not None and family.score(task, f"<answer>{steps[-1].answer}</answer>") == 0.0:
            return steps, notes
    return clean, clean_notes


def noisy_steps(family: Family, task: Task, rng: random.Random, tries: int = 8) -> list[SolverStep]:
    """The steps of :func:`noisy_trace`."""
    return noisy_trace(family, task, rng, tries)[0]


def trace_messages(
    family: Family, task: Task, rng: random.Random, noise: float, note_families: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """One training conversation: clean with probability ``1 - noise``, else with one mistake."""
    if rng.random() < noise:
        steps, notes = noisy_trace(family, task, rng, note_families=note_families)
    else:
        steps, notes = reference_trace(family, task, note_families)
    return solution_messages(task, steps, notes)
