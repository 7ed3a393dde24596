"""Policies: who answers the server's chat requests.

A policy is the port behind the server: ``async def respond(request) -> Reply``. The ones here need
no model:

- :class:`ReferencePolicy` plays a family's reference solver. It recognises the task from the first
  user message among a known task list (and, where tasks share a prompt, from the tool results so
  far), counts the tool results already in the conversation and answers the solver's next tool call,
  or the final answer once every call has a result. It keeps no per-conversation state, so concurrent
  rollouts cannot interfere; it records every tool result that differs from what the solver expected
  (``mismatches``), which would mean the served tools are not the family's tools.
- :class:`NonsensePolicy` answers fixed garbage without tools (the scorer must give it 0).
- :class:`ScriptedPolicy` plays a given list of replies in order (for protocol tests).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import msgspec
import structlog

from families import Family, SolverStep, Task

from ._protocol import ChatRequest, Reply, ToolCall

__all__ = [
    "NONSENSE",
    "Mismatch",
    "NonsensePolicy",
    "Policy",
    "PolicyError",
    "ReferencePolicy",
    "ScriptedPolicy",
]

log = structlog.get_logger(__name__)

# No digits and no tool-like words, so no family's scorer can read an answer into it.
NONSENSE = "Sorry, no idea. Perhaps a purple giraffe on a bicycle?"


class PolicyError(RuntimeError):
    """The policy cannot answer this request (unknown task, script exhausted); the server says 500."""


class RequestRefused(PolicyError):
    """The request itself cannot be served by this model (a prompt longer than its context, a sampling value it
    cannot use): the caller's fault, so the server says 400 as OpenAI does, and a client does not retry it.
    ``code`` is OpenAI's (``context_length_exceeded``), ``param`` the request field at fault."""

    def __init__(self, message: str, *, param: str, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


class Policy(Protocol):
    async def respond(self, request: ChatRequest) -> Reply: ...


class NonsensePolicy:
    """Garbage text, never a tool call."""

    def __init__(self, text: str = NONSENSE) -> None:
        self.text = text

    async def respond(self, request: ChatRequest) -> Reply:
        return Reply(content=self.text)


class ScriptedPolicy:
    """The given replies in order, one per request (strings are text replies)."""

    def __init__(self, replies: Sequence[Reply | str], *, cycle: bool = False) -> None:
        self._replies = [Reply(content=r) if isinstance(r, str) else r for r in replies]
        self._cycle = cycle
        self._next = 0

    async def respond(self, request: ChatRequest) -> Reply:
        if self._next >= len(self._replies):
            if not self._cycle or not self._replies:
                raise PolicyError(f"scripted policy exhausted after {len(self._replies)} replies")
            self._next = 0
        reply = self._replies[self._next]
        self._next += 1
        return reply


class Mismatch(msgspec.Struct, frozen=True, kw_only=True):
    """A tool result in the conversation that differs from what the reference solver got."""

    task_id: str
    step: int
    tool: str
    expected: str
    got: str


def _norm(text: str) -> str:
    return " ".join(text.split())


class _Turn(msgspec.Struct, frozen=True):
    """One tool call of the conversation so far and the result the tools gave."""

    name: str
    arguments: Any
    result: str


def _history(request: ChatRequest) -> list[_Turn]:
    """The conversation's tool calls, in order, each with its result (matched by call id)."""
    results = {m.tool_call_id: m.text for m in request.messages if m.role == "tool"}
    turns = []
    for message in request.messages:
        for call in message.tool_calls or []:
            try:
                arguments = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                arguments = call.function.arguments
            turns.append(_Turn(call.function.name, arguments, results.get(call.id, "")))
    return turns


class ReferencePolicy:
    """Plays ``family``'s reference solver on any of ``tasks``, one tool call per turn.

    Several tasks may share a prompt (their worlds differ, and only the tools reveal them). Among the
    tasks with the conversation's prompt, the policy follows one whose solution agrees with every tool
    call and result so far; a model-like solver makes the same next call for all of them, and the
    first differing result tells them apart.
    """

    def __init__(self, family: Family, tasks: Iterable[Task]) -> None:
        self.family = family
        self._by_prompt: dict[str, list[Task]] = {}
        for task in tasks:
            self._by_prompt.setdefault(_norm(task.prompt), []).append(task)
        if not self._by_prompt:
            raise ValueError("ReferencePolicy needs at least one task")
        self._solutions: dict[str, list[SolverStep]] = {}
        self.mismatches: list[Mismatch] = []

    def _candidates(self, request: ChatRequest) -> list[Task]:
        """Tasks whose prompt is the first user message (or, failing that, the longest contained in it)."""
        user = next((m for m in request.messages if m.role == "user"), None)
        if user is None:
            raise PolicyError("no user message in the conversation; cannot identify the task")
        text = _norm(user.text)
        exact = self._by_prompt.get(text)
        if exact is not None:
            return exact
        contained = [key for key in self._by_prompt if key and key in text]
        if not contained:
            raise PolicyError(f"no known task matches the user prompt {text[:120]!r}")
        return self._by_prompt[max(contained, key=len)]

    def _solution(self, task: Task) -> list[SolverStep]:
        steps = self._solutions.get(task.id)
        if steps is None:
            steps = list(self.family.solve(task))
            self._solutions[task.id] = steps
        return steps

    def _agrees(self, task: Task, history: list[_Turn]) -> bool:
        calls = [s for s in self._solution(task) if s.tool is not None]
        if len(history) > len(calls):
            return False
        return all(
            step.tool == turn.name
            and step.arguments == turn.arguments
            and (step.result is None or _norm(step.result) == _norm(turn.result))
            for step, turn in zip(calls, history, strict=False)
        )

    def identify(self, request: ChatRequest) -> Task:
        """The task this conversation is about (see the class docstring)."""
        candidates = self._candidates(request)
        if len(candidates) == 1:
            return candidates[0]
        history = _history(request)
        return next((t for t in candidates if self._agrees(t, history)), candidates[0])

    async def respond(self, request: ChatRequest) -> Reply:
        task = self.identify(request)
        steps = self._solution(task)
        calls = [s for s in steps if s.tool is not None]
        answer = next((s.answer for s in steps if s.answer is not None), None)
        if answer is None:
            raise PolicyError(f"the reference solution of {task.id} has no answer step")
        results = [m.text for m in request.messages if m.role == "tool"]
        for i, got in enumerate(results[: len(calls)]):
            expected = calls[i].result
            if expected is not None and _norm(expected) != _norm(got):
                mismatch = Mismatch(task_id=task.id, step=i, tool=calls[i].tool or "", expected=expected, got=got)
                if mismatch not in self.mismatches:
                    self.mismatches.append(mismatch)
                    log.warning("reference_policy.tool_result_mismatch", task=task.id, step=i, tool=mismatch.tool)
        if len(results) < len(calls):
            step = calls[len(results)]
            return Reply(tool_calls=[ToolCall(name=step.tool or "", arguments=json.dumps(step.arguments))])
        return Reply(content=answer)
