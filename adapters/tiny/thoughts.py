"""Scratchpad notes: what the tiny model writes before each tool call in its SFT traces.

A note quotes the instruction the call carries out, as the prompt words it, and spells out any named
value it uses (``Multiply by z. z = 2.``); the first note also quotes the start (``Start with q. q = 34.``).
This turns each decision into a copy a two-layer model can learn cheaply: the next instruction is the
prompt text that follows the one quoted last turn (an induction-head copy), and every tool argument is
a copy from the note just written or the last tool result. Without notes, picking "the k-th
instruction" and resolving a name took the small model many times more training to learn.

Notes are derived from the task's ``world`` the calls were made from, so a trace whose mistake is a
misread instruction quotes the misread instruction: note and call always agree. A family without a
note function gets no notes (plain tool calls, as the reference solvers make them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

from families import SolverStep, Task
from families.string_pipeline import PHRASES

__all__ = ["NOTE_FAMILIES", "TOKENIZER_NOTE_FAMILIES", "notes_for"]

NoteFn = Callable[[Task, Sequence[SolverStep]], list[str]]

_CALC = {"add": "Add {}.", "sub": "Subtract {}.", "mul": "Multiply by {}.", "div": "Divide by {}."}


def _calc(task: Task, steps: Sequence[SolverStep]) -> list[str]:
    variables: dict[str, int] = task.world["vars"]

    def named(ref: Any) -> str:
        return f" {ref} = {variables[ref]}." if isinstance(ref, str) else ""

    start = task.world["start"]
    notes = []
    for k, (op, ref) in enumerate(task.world["ops"]):
        note = _CALC[op].format(ref) + named(ref)
        if k == 0:
            note = f"Start with {start}.{named(start)} {note}"
        notes.append(note)
    return notes


def _strings(task: Task, steps: Sequence[SolverStep]) -> list[str]:
    variables: dict[str, str] = task.world["vars"]

    def show(ref: Any) -> str:
        if isinstance(ref, str):
            return ref[1:] if ref.startswith("$") else f'"{ref}"'
        return str(ref)

    def named(refs: Sequence[Any]) -> str:
        return "".join(f' {r[1:]} = "{variables[r[1:]]}".' for r in refs if isinstance(r, str) and r.startswith("$"))

    start = task.world["start"]
    notes = []
    for k, (op, args) in enumerate(task.world["ops"]):
        text = PHRASES[op].format(**{key: show(v) for key, v in args.items()}).replace(" 1 characters", " 1 character")
        note = text + named(list(args.values()))
        if k == 0:
            note = f"Start with {show(start)}.{named([start])} {note}"
        notes.append(note)
    return notes


def _ledger(task: Task, steps: Sequence[SolverStep]) -> list[str]:
    notes = []
    for op in task.world["ops"]:
        if op[0] == "deposit":
            notes.append(f"deposit {op[2]} to {op[1]}.")
        elif op[0] == "withdraw":
            notes.append(f"withdraw {op[2]} from {op[1]}.")
        else:
            notes.append(f"transfer {op[3]} from {op[1]} to {op[2]}.")
    notes.append(f"{task.world['target']}'s final balance.")
    return notes


_TRIAGE_PROMPT = re.compile(r"^Incident (INC-\d+) is open on (\S+)\.")
_DEPLOY_LINE = re.compile(r"^(D-\d+) at (\d\d:\d\d)$")
_OPENED = re.compile(r"^(INC-\d+) open sev\d opened (\d\d:\d\d)$")


def _triage(task: Task, steps: Sequence[SolverStep]) -> list[str]:
    # Each comparison is made one service at a time: the note before the next list_deploys carries the
    # best deploy so far, so the final choice is one comparison of the last list against the note.
    lead = _TRIAGE_PROMPT.match(task.prompt)
    if lead is None:
        raise ValueError(f"{task.id}: no incident in the prompt")
    incident, target = lead.groups()
    opened = ""
    best: tuple[str, str, str] | None = None  # (time, deploy, service)
    notes: list[str] = []

    def best_text() -> str:
        return "none yet" if best is None else f"{best[1]} at {best[0]} on {best[2]}"

    for step in steps:
        if step.tool == "list_incidents":
            notes.append(f"{incident} is open on {target}.")
        elif step.tool == "get_service" and not notes[1:]:
            notes.append(f"{incident} opened {opened}.")
        elif step.tool == "list_deploys":
            service = step.arguments["service"]
            notes.append(f"Best so far: {best_text()}. Deploys to {service} before {opened}:")
        elif step.tool == "get_service":
            notes.append(f"Latest before {opened}: {best_text()}. Who is on call for {step.arguments['name']}?")
        for line in (step.result or "").splitlines():
            if step.tool == "list_incidents" and (m := _OPENED.match(line)) and m.group(1) == incident:
                opened = m.group(2)
            d = _DEPLOY_LINE.match(line) if step.tool == "list_deploys" else None
            if d is not None and d.group(2) < opened and (best is None or d.group(2) > best[0]):
                best = (d.group(2), d.group(1), step.arguments["service"])
    # The last note goes with the answer: the final comparison, or whose on-call name answers.
    answer = steps[-1].answer or ""
    if "on call" not in task.prompt:
        notes.append(f"Latest before {opened}: {best_text()}.")
    elif best is not None and notes[-1].endswith("?"):  # looked up the culprit's service just now
        notes.append(f"On call for {best[2]}: {answer}.")
    else:  # the culprit's service is the one looked up first
        notes.append(f"Latest before {opened}: {best_text()}. On call for {target}: {answer}.")
    return notes


NOTE_FAMILIES: dict[str, NoteFn] = {
    "calc_chain": _calc,
    "string_pipeline": _strings,
    "ledger": _ledger,
    "triage": _triage,
}
# The families that had notes when the tokenizer was trained: its texts must stay the same so that a
# rebuild gives the same vocabulary (and the stage-1 checkpoints keep theirs).
TOKENIZER_NOTE_FAMILIES: frozenset[str] = frozenset({"calc_chain", "string_pipeline", "ledger"})


def notes_for(
    family: str, solved: Task, steps: Sequence[SolverStep], only: Collection[str] | None = None
) -> list[str] | None:
    """One note per tool call of ``steps`` (solved from ``solved``'s world), or None for no notes (a family
    without a note function, or not in ``only``). A family may add one more note, written before the answer."""
    fn = NOTE_FAMILIES.get(family)
    if fn is None or (only is not None and family not in only):
        return None
    notes = fn(solved, steps)
    calls = sum(s.tool is not None for s in steps)
    if len(notes) not in (calls, calls + 1):  # a solver that made a different number of calls than the world lists
        raise ValueError(f"{solved.id}: {len(notes)} notes for {calls} tool calls")
    return notes
