"""The one-pass fold: blocks of records into several projections at once, as a replay and a rebuild run it.

A replay of a long run spends about half its time here (docs/performance.md, "Replay"), so the fold is generated
code: one function, made (as ``dataclasses`` makes ``__init__``) from the event types seen so far and the
projections' handlers, that tests each record's class against the types in turn, most frequent first, and calls
that type's handlers with every state held in a local. Two things a plain loop pays per record are gone: a dict
lookup and a call to a per-type function, and the ``current`` record set on a projection whose handler never
reads it (:func:`reads_record`). Each projection still sees its records in seq order; across projections the
order does not matter (they share no state).
"""

from __future__ import annotations

import dis
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from types import CodeType, FunctionType
from typing import Any

from events import EventBody, Recorded

from .projection import Projection, via_apply

__all__ = ["Folder", "reads_record"]

_Fold = Callable[[Iterator[Recorded], list[Any], list[int]], Recorded | None]
_CHUNK = 4096  # records per call of the generated function when given one long iterable (a rebuild's tail)
_FIRST_SORT = 1024  # records folded before the branches are first put in frequency order; then at 4x, 16x, ...
_MISSING = object()
# What may follow a load of ``self`` without passing it on: an attribute read, a method load, a write, a delete
_SELF_READS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR"})


def reads_record(projection: Projection[Any], handler: Callable[..., Any]) -> bool:
    """Whether ``handler`` (of ``projection``) may read ``self.current``: what it or any method it calls on
    ``self`` names ``current``, or uses ``self`` as anything but the owner of an attribute (passes it on, keeps
    it), or is not a plain Python function. Erring to True only costs the write the Folder would have skipped.

    Read from CPython 3.11's bytecode; on any other version every handler counts as reading it (3.12 loads
    methods with LOAD_ATTR, 3.13 loads two locals in one instruction: the analysis would miss a way through)."""
    if sys.version_info[:2] != (3, 11):
        return True
    return _reads(type(projection), handler, set())


def _reads(cls: type, fn: Any, seen: set[CodeType]) -> bool:
    if fn is via_apply or not isinstance(fn, FunctionType):
        return True
    code = fn.__code__
    if code in seen:
        return False
    seen.add(code)
    if not code.co_varnames or code.co_argcount == 0:
        return True  # no ``self`` to follow
    return _code_reads(cls, code, code.co_varnames[0], seen)


def _code_reads(cls: type, code: CodeType, me: str, seen: set[CodeType]) -> bool:
    if "current" in code.co_names or "current" in code.co_consts:
        return True
    instructions = list(dis.get_instructions(code))
    for ins, nxt in zip(instructions, instructions[1:] + instructions[-1:], strict=True):
        if ins.opname not in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE") or ins.argval != me:
            continue
        if nxt is ins or nxt.opname not in _SELF_READS:
            return True  # ``self`` passed on or kept: anything may read its current record
        member = inspect.getattr_static(cls, nxt.argval, _MISSING)
        if isinstance(member, property):
            member = member.fget
        if isinstance(member, staticmethod | classmethod):
            continue  # no instance to read from
        if isinstance(member, FunctionType):
            if _reads(cls, member, seen):
                return True
        elif nxt.opname == "LOAD_METHOD" or hasattr(member, "__get__"):
            return True  # a call of what the class does not define as a method, or another descriptor: anything
    # Comprehensions, lambdas and nested functions that capture ``self``
    return any(
        isinstance(c, CodeType) and me in c.co_freevars + c.co_cellvars and _code_reads(cls, c, me, seen)
        for c in code.co_consts
    )


class Folder:
    """Folds blocks of records into several projections in one pass and counts the records of each event type."""

    def __init__(self, projections: Iterable[Projection[Any]]) -> None:
        self.projections = list(projections)
        self._types: list[type[EventBody]] = []  # every type seen, by the slot of its count
        self._counts: list[int] = []  # records folded, by slot
        self._folded = 0
        self._sort_at = _FIRST_SORT
        self._fold: _Fold = self._generate()

    def counts(self) -> dict[type[EventBody], int]:
        """Records folded so far, by event type."""
        return dict(zip(self._types, self._counts, strict=True))

    def fold(self, records: Iterable[Recorded], states: list[Any]) -> None:
        """Apply ``records`` in order; ``states[i]`` is the state of ``projections[i]`` (updated in place)."""
        if isinstance(records, list) and len(records) <= _CHUNK:  # a replay's block
            self._fold_chunk(records, states)
            return
        it = iter(records)
        while chunk := list(islice(it, _CHUNK)):
            self._fold_chunk(chunk, states)

    def _fold_chunk(self, chunk: list[Recorded], states: list[Any]) -> None:
        it = iter(chunk)
        # The generated function stops at a type it has no branch for and hands that record back.
        while (new := self._fold(it, states, self._counts)) is not None:
            self._types.append(type(new.event))
            self._counts.append(0)
            self._fold = self._generate()
            self._fold(iter((new,)), states, self._counts)
        self._folded += len(chunk)
        if self._folded >= self._sort_at:  # the branches in the order of the records seen so far
            self._sort_at *= 4
            self._fold = self._generate()

    def _generate(self) -> _Fold:
        # Only integers and fixed names reach the source; the objects it uses go in its namespace.
        namespace: dict[str, Any] = {}
        used: set[int] = set()
        branches: list[str] = []
        for slot in sorted(range(len(self._types)), key=lambda s: -self._counts[s]):
            event_type = self._types[slot]
            namespace[f"T{slot}"] = event_type
            branches.append(f"            {'elif' if branches else 'if'} cls is T{slot}:")
            branches.append(f"                c{slot} += 1")
            for i, p in enumerate(self.projections):
                h = p.handler_for(event_type)
                if h is None:
                    continue
                used.add(i)
                namespace[f"p{i}"], namespace[f"h{slot}_{i}"] = p, h
                if reads_record(p, h):
                    branches.append(f"                p{i}.current = rec")
                branches.append(f"                s{i} = h{slot}_{i}(p{i}, s{i}, ev)")
        slots = range(len(self._types))
        lines = [
            "def fold(records, states, counts):",
            *(f"    s{i} = states[{i}]" for i in sorted(used)),
            *(f"    c{slot} = 0" for slot in slots),
            "    new = None",
            "    try:",
            "        for rec in records:",
            "            ev = rec.event",
            "            cls = type(ev)",
            *branches,
            "            else:" if branches else "            if True:",
            "                new = rec",
            "                break",
            "    finally:",
            *(f"        states[{i}] = s{i}" for i in sorted(used)),
            *(f"        counts[{slot}] += c{slot}" for slot in slots),
            "        pass",
            "    return new",
        ]
        exec("\n".join(lines), namespace)  # generated from integers and fixed names only (see above)
        fold: _Fold = namespace["fold"]
        return fold
