"""A small, self-contained calc_chain training env (verifiers v1): the probe tests' good submission.

Tasks are chained integer arithmetic drawn from this package's own seeded generator; the tools are the
family's eval tool interface (add, sub, mul, div with integer arguments, bare names); the reward is 1.0
for the right final answer inside <answer></answer> tags.
"""

from __future__ import annotations

import random
import re
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

SYSTEM_PROMPT = (
    "Solve the task by calling the tools. When you are done, reply with only the final answer "
    "inside <answer></answer> tags."
)
_PHRASE = {"add": "Add {}.", "sub": "Subtract {}.", "mul": "Multiply by {}.", "div": "Divide by {}."}
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


class CalcData(vf.TaskData):
    answer: str
    world: dict[str, Any] = Field(default_factory=dict)


class CalcTaskConfig(vf.TaskConfig):
    pass


class CalcToolsetConfig(vf.SharedToolsetConfig):
    pass


class CalcToolset(vf.Toolset[CalcToolsetConfig]):
    TOOL_PREFIX = None  # bare names, as in the hidden eval

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers and return the sum."""
        return str(a + b)

    @vf.tool
    def sub(self, a: int, b: int) -> str:
        """Subtract b from a and return the difference."""
        return str(a - b)

    @vf.tool
    def mul(self, a: int, b: int) -> str:
        """Multiply two integers and return the product."""
        return str(a * b)

    @vf.tool
    def div(self, a: int, b: int) -> str:
        """Divide a by b and return the quotient (exact when b divides a)."""
        if b == 0:
            raise ValueError("division by zero")
        return str(a // b) if a % b == 0 else f"{a / b:.6g}"


class CalcTask(vf.Task[CalcData, vf.State, CalcTaskConfig]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: Any) -> float:
        found = _ANSWER.findall(trace.last_reply or "")
        reply = found[-1] if found else (trace.last_reply or "")
        return float(reply.strip().replace(",", "") == self.data.answer)


class CalcConfig(vf.TasksetConfig):
    num_tasks: int = 64
    seed: int = 1234
    task: CalcTaskConfig = CalcTaskConfig()
    tools: CalcToolsetConfig = CalcToolsetConfig()


def _draw(rng: random.Random) -> tuple[str, dict[str, Any], str]:
    value = start = rng.randint(1, 50)
    ops: list[list[Any]] = []
    for _ in range(rng.randint(2, 5)):
        k, m = rng.randint(1, 20), rng.randint(2, 5)
        choices = [("add", k)] if value + k <= 999 else []
        choices += [("sub", k)] if value - k >= 0 else []
        choices += [("mul", m)] if 0 < value * m <= 999 else []
        choices += [("div", d) for d in range(2, 6) if value > 0 and value % d == 0][:1]
        op, arg = rng.choice(choices)
        value = {"add": value + arg, "sub": value - arg, "mul": value * arg, "div": value // max(arg, 1)}[op]
        ops.append([op, arg])
    steps = " ".join(_PHRASE[op].format(arg) for op, arg in ops)
    return f"Start with {start}. {steps} What is the result?", {"start": start, "vars": {}, "ops": ops}, str(value)


class CalcTaskset(vf.Taskset[CalcTask, CalcConfig]):
    def load(self) -> list[CalcTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for i in range(self.config.num_tasks):
            prompt, world, answer = _draw(rng)
            data = CalcData(id=f"calc/{i}", prompt=prompt, system_prompt=SYSTEM_PROMPT, answer=answer, world=world)
            tasks.append(CalcTask(data, self.config.task))
        return tasks

    @classmethod
    def toolsets(cls, config: CalcConfig) -> list[vf.Toolset]:
        return [CalcToolset(config.tools)]


__all__ = ["CalcTaskset"]
