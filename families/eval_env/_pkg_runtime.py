"""Runtime of a generated family eval package (copied verbatim into each package as ``_runtime.py``).

It must import nothing from this project: a generated package runs on a GPU pod with only
``verifiers`` and ``msgspec`` installed next to its vendored family source.

Tools and per-task state. The family tools are bound to one task (``family.tools(task)``) and some
are stateful (``ledger`` balances change as the episode goes). One tool server per rollout would
carry that state naturally but costs ~8 CPU-s and ~220 MB per rollout (a process importing
verifiers), so the eval uses ONE shared tool server (``Taskset.toolsets``) and keeps each rollout's
state in verifiers' per-rollout state channel instead: ``Task.setup`` writes the task into
``trace.state``; before each tool call the shared server pulls that rollout's state, rebuilds the
task's toolbox, replays the rollout's earlier calls on it (so a stateful world is exactly where the
model left it), runs the new call, appends it to the call log and pushes the state back. Replaying is
quadratic in the number of calls, which is a few dozen at most, and needs nothing from a family but
deterministic tools. The null harness runs one rollout's tool calls one after another, so the
channel's last-write-wins updates never race within a rollout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any, ClassVar, Protocol

import msgspec
import verifiers.v1 as vf  # type: ignore[import-untyped]
from pydantic import BaseModel, Field

__all__ = [
    "FamilyState",
    "FamilyTask",
    "FamilyTaskData",
    "FamilyTools",
    "ToolCallRecord",
    "load_task_data",
    "replay_call",
]


class _ToolBox(Protocol):
    def call(self, name: str, arguments: Mapping[str, Any]) -> str: ...


class _Step(Protocol):
    @property
    def answer(self) -> str | None: ...


class _Family(Protocol):
    def tools(self, task: Any) -> _ToolBox: ...

    def solve(self, task: Any) -> Sequence[_Step]: ...

    def score(self, task: Any, reply: str) -> float: ...


class ToolCallRecord(BaseModel):
    name: str
    arguments: dict[str, Any]
    result: str


class FamilyState(vf.State):  # type: ignore[misc]
    """One rollout's tool state: its task (as the family's Task fields) and the calls made so far."""

    task: dict[str, Any] | None = None
    calls: list[ToolCallRecord] = Field(default_factory=list)


class FamilyTaskData(vf.TaskData):  # type: ignore[misc]
    """A family task as verifiers task data; ``id`` is the family task id."""

    family: str
    answer: str
    world: dict[str, Any] = Field(default_factory=dict)
    difficulty: dict[str, int] = Field(default_factory=dict)

    def task_fields(self) -> dict[str, Any]:
        """The fields of the family's own Task struct."""
        return {
            "id": self.id,
            "family": self.family,
            "prompt": self.prompt_text,
            "answer": self.answer,
            "world": self.world,
            "difficulty": self.difficulty,
        }


def replay_call(
    family: _Family,
    task: Any,
    calls: Sequence[ToolCallRecord],
    name: str,
    arguments: dict[str, Any],
) -> str:
    """Run one tool call on a fresh toolbox for ``task`` after replaying ``calls`` on it."""
    box = family.tools(task)
    for record in calls:
        box.call(record.name, record.arguments)
    return box.call(name, arguments)


class FamilyTools(vf.Toolset[vf.SharedToolsetConfig, FamilyState]):  # type: ignore[misc]
    """Base of a generated toolset: each ``@vf.tool`` method forwards to :meth:`call`."""

    TOOL_PREFIX: ClassVar[str | None] = None  # bare names: the model sees ``add``, as in the task spec
    FAMILY: ClassVar[_Family]
    TASK_TYPE: ClassVar[Callable[..., Any]]

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        state = self.state
        if not isinstance(state, FamilyState) or state.task is None:
            raise RuntimeError(
                "this tool server has no task for the calling rollout; its Task.setup must put the task "
                "into trace.state (FamilyTask does)"
            )
        task = msgspec.convert(state.task, self.TASK_TYPE)
        result = replay_call(self.FAMILY, task, state.calls, name, arguments)
        state.calls.append(ToolCallRecord(name=name, arguments=arguments, result=result))
        return result


class FamilyTask(vf.Task[FamilyTaskData, FamilyState, vf.TaskConfig]):  # type: ignore[misc]
    """A family task: puts itself into the rollout state and scores the final reply with the family scorer."""

    FAMILY: ClassVar[_Family]
    TASK_TYPE: ClassVar[Callable[..., Any]]

    @property
    def key(self) -> str:
        # The family task id is durable and unique, unlike the content hash of data that carries idx.
        return str(self.data.id) if self.data.id else str(self.hash)

    def family_task(self) -> Any:
        return msgspec.convert(self.data.task_fields(), self.TASK_TYPE)

    async def setup(self, trace: Any, runtime: Any) -> None:
        trace.state = FamilyState(task=self.data.task_fields(), calls=[])

    async def validate(self, runtime: Any) -> bool:
        """Gold check (``vf-validate``): the vendored reference solver's answer scores 1.0."""
        task = self.family_task()
        answers = [s.answer for s in self.FAMILY.solve(task) if s.answer is not None]
        return len(answers) == 1 and self.FAMILY.score(task, answers[0]) == 1.0

    # Rewards and metrics must be coroutines: verifiers 0.4.0 gathers them (a sync one is a TaskError).
    @vf.reward(weight=1.0)  # type: ignore[untyped-decorator]
    async def correct(self, trace: Any) -> float:
        return float(self.FAMILY.score(self.family_task(), trace.last_reply or ""))

    @vf.metric  # type: ignore[untyped-decorator]
    async def tool_calls(self, trace: Any) -> float:
        state = trace.state
        return float(len(state.calls)) if isinstance(state, FamilyState) else 0.0


def load_task_data(package: str, system_prompt: str | None) -> list[FamilyTaskData]:
    """The tasks bundled in ``<package>/tasks.jsonl`` (one family Task object per line)."""
    text = resources.files(package).joinpath("tasks.jsonl").read_text(encoding="utf-8")
    out: list[FamilyTaskData] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = msgspec.json.decode(line)
            out.append(
                FamilyTaskData(
                    id=row["id"],
                    name=row["id"],
                    prompt=row["prompt"],
                    system_prompt=system_prompt,
                    family=row["family"],
                    answer=row["answer"],
                    world=row.get("world", {}),
                    difficulty=row.get("difficulty", {}),
                )
            )
        except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{package}/tasks.jsonl:{lineno}: bad task: {exc}") from exc
    return out
