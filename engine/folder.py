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

__all__ = ["ANALYSED", "Folder", "reads_record"]

_Fold = Callable[[Iterator[Recorded], list[Any], list[int]], Recorded | None]
_CHUNK = 4096  # records per call of the generated function when given one long iterable (a rebuild's tail)
_FIRST_SORT = 1024  # records folded before the branches are first put in frequency order; then at 4x, 16x, ...
_MISSING = object()
#: The CPython versions whose bytecode :func:`reads_record` reads (tests/engine/test_folder.py runs on each)
ANALYSED = frozenset({(3, 11), (3, 12), (3, 13)})
# What may follow a load of ``self`` without passing it on: an attribute read, a method load, a write, a delete
_SELF_READS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR"})
# One local on the stack. Not LOAD_CLOSURE (3.11, 3.12): it only puts ``self``'s cell in a closure being made, and
# the code of every function that captures ``self`` is read as well (the end of _code_reads); 3.13 makes closures
# with LOAD_FAST, which counts as passing ``self`` on.
_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF"})


def reads_record(projection: Projection[Any], handler: Callable[..., Any]) -> bool:
    """Whether ``handler`` (of ``projection``) may read ``self.current``: what it or any method it calls on
    ``self`` names ``current``, or uses ``self`` as anything but the owner of an attribute (passes it on, keeps
    it), or is not a plain Python function. Erring to True only costs the write the Folder would have skipped.

    Read from CPython's bytecode, of the versions in :data:`ANALYSED` (each changed how ``self`` is loaded:
    3.12 loads methods with LOAD_ATTR, 3.13 two locals in one instruction); on any other version every handler
    counts as reading it, since the analysis could miss a way through."""
    if sys.version_info[:2] not in ANALYSED:
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
        if ins.opname in _LOADS:
            if ins.argval != me:
                continue
        elif ins.opname in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST"):  # 3.13: two locals, the second on top
            first, second = ins.argval
            if ins.opname == "LOAD_FAST_LOAD_FAST" and first == me:
                return True  # under another value: an argument of what comes, most likely
            if second != me:
                continue
        elif ins.opname == "LOAD_FAST_AND_CLEAR" and ins.argval == me:
            return True  # ``self`` saved around a comprehension that rebinds the name: not followed
        else:
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
        elif _loads_method(nxt) or hasattr(member, "__get__"):
            return True  # a call of what the class does not define as a method, or another descriptor: anything
    # Comprehensions, lambdas and nested functions that capture ``self``
    return any(
        isinstance(c, CodeType) and me in c.co_freevars + c.co_cellvars and _code_reads(cls, c, me, seen)
        for c in code.co_consts
    )


def _loads_method(ins: dis.Instruction) -> bool:
    """A load of an attribute to call it: 3.11's LOAD_METHOD, or 3.12's LOAD_ATTR with its low bit set."""
    return ins.opname == "LOAD_METHOD" or (
        ins.opname == "LOAD_ATTR" and sys.version_info >= (3, 12) and bool((ins.arg or 0) & 1)
    )


class Folder:
    """Folds blocks of records into several projections in one pass and counts the records of each event type."""

    def __init__(self, projections: Iterable[Projection[Any]]) -> None:
        self.projections = list(projections)
        self._types: list[type[EventBody]] = []  # every type seen, by the slot of its count
        self._slots: dict[type[EventBody], int] = {}
        self._counts: list[int] = []  # records folded, by slot
        # Each type's handlers and branch body, made once (the analysis reads bytecode), and the namespace the
        # generated function runs in
        self._handlers: list[list[tuple[int, Projection[Any], Callable[..., Any]]]] = []
        self._bodies: list[list[str]] = []
        self._uses: set[int] = set()
        self._namespace: dict[str, Any] = {}
        self._fold: _Fold = self._generate()
        # Compiling the function costs ~1 ms (more with more types): it is regenerated at most once per chunk, at
        # the start of the next one, when a type it lacks came or the branches are due to be re-sorted. A fold of
        # one chunk (a rebuild's short tail) never compiles one and takes the slow path for every record.
        self._stale = False
        self._folded = 0
        self._sort_at = _FIRST_SORT

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
        if self._stale:
            self._fold, self._stale = self._generate(), False
        it = iter(chunk)
        # The generated function stops at a type it has no branch for and hands that record back.
        while (new := self._fold(it, states, self._counts)) is not None:
            self._apply_one(new, states)
        self._folded += len(chunk)
        if self._folded >= self._sort_at:  # the branches in the order of the records seen so far
            self._sort_at *= 4
            self._stale = True

    def _apply_one(self, rec: Recorded, states: list[Any]) -> None:
        """The slow path, for a record of a type the generated function does not have yet."""
        event_type = type(rec.event)
        slot = self._slots.get(event_type)
        if slot is None:
            slot = self._add(event_type)
        self._stale = True
        self._counts[slot] += 1
        for i, p, h in self._handlers[slot]:
            p.current = rec  # always, here: the analysis only spares the generated branches the write
            states[i] = h(p, states[i], rec.event)

    def _add(self, event_type: type[EventBody]) -> int:
        # Only integers and fixed names reach the source; the objects it uses go in its namespace.
        slot = len(self._types)
        self._types.append(event_type)
        self._slots[event_type] = slot
        self._counts.append(0)
        self._namespace[f"T{slot}"] = event_type
        handlers: list[tuple[int, Projection[Any], Callable[..., Any]]] = []
        body = [f"                c{slot} += 1"]
        for i, p in enumerate(self.projections):
            h = p.handler_for(event_type)
            if h is None:
                continue
            handlers.append((i, p, h))
            self._uses.add(i)
            self._namespace[f"p{i}"], self._namespace[f"h{slot}_{i}"] = p, h
            if reads_record(p, h):
                body.append(f"                p{i}.current = rec")
            body.append(f"                s{i} = h{slot}_{i}(p{i}, s{i}, ev)")
        self._handlers.append(handlers)
        self._bodies.append(body)
        return slot

    def _generate(self) -> _Fold:
        branches: list[str] = []
        for slot in sorted(range(len(self._types)), key=lambda s: -self._counts[s]):
            branches.append(f"            {'elif' if branches else 'if'} cls is T{slot}:")
            branches.extend(self._bodies[slot])
        used, slots = sorted(self._uses), range(len(self._types))
        lines = [
            "def fold(records, states, counts):",
            *(f"    s{i} = states[{i}]" for i in used),
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
            *(f"        states[{i}] = s{i}" for i in used),
            *(f"        counts[{slot}] += c{slot}" for slot in slots),
            "        pass",
            "    return new",
        ]
        namespace = dict(self._namespace)
        exec("\n".join(lines), namespace)  # generated from integers and fixed names only (see _add)
        fold: _Fold = namespace["fold"]
        return fold
