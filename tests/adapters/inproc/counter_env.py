"""Small verifiers v1 envs for test_runner: a per-rollout toolset, stop hooks, a reward that raises, a reward
that needs a runtime. A module of its own so that collecting test_runner does not import verifiers (issue 18)."""

from __future__ import annotations

from typing import Any, ClassVar

import verifiers.v1 as vf

from adapters.inproc import InprocEnv


class CounterData(vf.TaskData):
    start: int
    target: int


class CounterToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX: ClassVar[str | None] = "counter"

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.value = 0
        self.setups = 0

    async def setup_task(self, task: Any) -> None:
        self.value = task.start  # per-rollout server: fresh instance, set up for its task
        self.setups += 1

    @vf.tool
    def bump(self, k: int) -> int:
        """Add k to the counter and return the new value."""
        self.value += k
        return self.value


class CounterConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class CounterTask(vf.Task[CounterData, vf.State, CounterConfig]):
    @classmethod
    def toolsets(cls, config: CounterConfig) -> list[Any]:
        return [CounterToolset(config.tools)]

    @vf.reward(weight=2.0)
    async def reached(self, trace: Any) -> float:
        return float(trace.last_reply == str(self.data.target))

    @vf.stop
    async def too_many_tools(self, trace: vf.Trace) -> bool:  # verifiers routes a stop by its annotation
        return len(trace.tool_messages) >= 3


class ExplodingTask(CounterTask):
    @vf.reward
    async def explode(self, trace: Any) -> float:
        raise ValueError("reward exploded")


class RuntimeTask(CounterTask):
    @vf.reward
    async def needs_files(self, trace: Any, runtime: Any) -> float:
        return 1.0


class CounterTaskset(vf.Taskset[CounterTask, vf.TasksetConfig]):
    TASK: ClassVar[type] = CounterTask

    def load(self) -> list[Any]:
        return [
            self.TASK(CounterData(prompt=f"count from {s}", start=s, target=s + 5), CounterConfig()) for s in (1, 2)
        ]


def counter_env(task_type: type = CounterTask) -> InprocEnv:
    taskset_type = type("Taskset", (CounterTaskset,), {"TASK": task_type})
    return InprocEnv("counter", taskset_type(vf.TasksetConfig(id="counter")))
