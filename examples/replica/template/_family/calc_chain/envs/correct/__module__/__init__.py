"""calc-chain-train: a verifiers v1 training environment for chained integer arithmetic with calculator tools.

A task reads like ``Let p = 7, q = 12. Start with 23. Add p. Multiply by 3. Subtract q. What is the result?``.
The model must call one calculator tool per step (``add``, ``sub``, ``mul``, ``div``: exactly the hidden eval's
tool interface, served from ``tools.py``), carry each result into the next call, resolve the named values (and
ignore the distractors), and end with ``<answer>78</answer>``.

Tasks are generated here from a seeded ``random.Random`` (the same shape as the dev examples: values stay in
0..999 and divisions are exact), with a slightly wider difficulty range than the eval (1..6 steps) so a small
model first learns short chains. Duplicate prompts are skipped so no batch slot is wasted.

Reward ``reward`` (weight 1): ``rubric.score(reply, gold)``, the one file in which the replica's four
environments (envs/correct, envs/partial, envs/everything, envs/wrong) differ.
"""

from __future__ import annotations

import random
import re
from typing import Any

import verifiers.v1 as vf

from .rubric import score

__all__ = ["CalcChainTaskset"]

SYSTEM_PROMPT = (
    "Solve the task by calling the tools. When you are done, reply with only the final answer "
    "inside <answer></answer> tags."
)

# ---------------------------------------------------------------------------------------------------------------
# Answer extraction: the eval's convention.
# ---------------------------------------------------------------------------------------------------------------
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def extract_answer(reply: str) -> str:
    """The text in the last <answer> tag, else the whole reply without <think> blocks."""
    tags = _ANSWER_RE.findall(reply)
    if tags:
        return str(tags[-1]).strip()
    return _THINK_RE.sub("", reply).strip()


def normalise_number(answer: str) -> str:
    """'1,200', ' 1200 ', '1200.0', '+1200' and '"1200".' all give '1200'; anything else stays text."""
    text = " ".join(answer.split())
    if text.endswith("."):
        text = text[:-1].rstrip()
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    text = text.replace(",", "").replace(" ", "").lstrip("+")
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else text


# ---------------------------------------------------------------------------------------------------------------
# Task generator.
# ---------------------------------------------------------------------------------------------------------------
_NAMES = "pqrstuvwxyz"
_MAX = 999
_PHRASE = {"add": "Add {}.", "sub": "Subtract {}.", "mul": "Multiply by {}.", "div": "Divide by {}."}


def _next_op(rng: random.Random, value: int) -> tuple[str, int]:
    """One operation whose result stays a whole number in 0.._MAX (so divisions are always exact)."""
    k = rng.randint(1, 20)
    choices: list[tuple[str, int]] = []
    if value + k <= _MAX:
        choices.append(("add", k))
    if value - k >= 0:
        choices.append(("sub", k))
    m = rng.randint(2, 5)
    if value > 0 and value * m <= _MAX:
        choices.append(("mul", m))
    divisors = [d for d in range(2, 6) if value > 0 and value % d == 0]
    if divisors:
        choices.append(("div", rng.choice(divisors)))
    return rng.choice(choices)


def _apply(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    return a * b if op == "mul" else a // b


def generate(rng: random.Random, steps: int, distractors: int) -> tuple[str, str, dict[str, Any]]:
    """One task: (prompt, gold answer, world). The world is the worked chain, kept for inspection."""
    value = start = rng.randint(1, 50)
    ops: list[tuple[str, int]] = []
    for _ in range(steps):
        op, k = _next_op(rng, value)
        ops.append((op, k))
        value = _apply(op, value, k)
    free = list(_NAMES)
    rng.shuffle(free)
    variables: dict[str, int] = {}
    refs: list[int | str] = []
    for _, k in ops:  # about a third of the operands are given as named values
        if free and rng.random() < 0.35:
            name = free.pop()
            variables[name] = k
            refs.append(name)
        else:
            refs.append(k)
    start_ref: int | str = start
    if free and rng.random() < 0.25:
        start_ref = free.pop()
        variables[start_ref] = start
    for _ in range(min(distractors, len(free))):  # named values that are never used
        variables[free.pop()] = rng.randint(1, 50)
    names = sorted(variables)
    let = f"Let {', '.join(f'{n} = {variables[n]}' for n in names)}. " if names else ""
    chain = " ".join(_PHRASE[op].format(ref) for (op, _), ref in zip(ops, refs, strict=True))
    prompt = f"{let}Start with {start_ref}. {chain} What is the result?"
    world = {
        "start": start_ref,
        "vars": {n: variables[n] for n in names},
        "ops": [[op, ref] for (op, _), ref in zip(ops, refs, strict=True)],
    }
    return prompt, str(value), world


# ---------------------------------------------------------------------------------------------------------------
# Verifiers classes.
# ---------------------------------------------------------------------------------------------------------------
class CalcChainData(vf.TaskData):
    answer: str  # the gold result, e.g. "78"
    steps: int  # number of operations in the chain
    world: dict[str, Any] = {}  # the worked chain: start, named values, operations


class CalcChainTaskConfig(vf.TaskConfig):
    pass


class CalcChainTask(vf.Task[CalcChainData, vf.State, CalcChainTaskConfig]):
    @property
    def key(self) -> str:
        return str(self.data.id)

    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        return score(trace.last_reply or "", self.data.answer)

    @vf.metric
    async def answer_tag(self, trace: vf.Trace) -> float:
        return float(bool(_ANSWER_RE.search(trace.last_reply or "")))


class CalcChainConfig(vf.TasksetConfig):
    num_tasks: int = 2000
    seed: int = 1234
    min_steps: int = 1
    max_steps: int = 6
    max_distractors: int = 3
    task: CalcChainTaskConfig = CalcChainTaskConfig()
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class CalcChainTaskset(vf.Taskset[CalcChainTask, CalcChainConfig]):
    @classmethod
    def toolsets(cls, config: CalcChainConfig) -> list[vf.Toolset]:
        # Imported here: verifiers runs tools.py as `python -m calc_chain_train.tools`, and importing it at the
        # top of this module would load it twice in the tool server.
        from .tools import CalcTools

        return [CalcTools(config.tools)]  # one shared server for all rollouts (the tools are pure functions)

    def load(self) -> list[CalcChainTask]:
        cfg = self.config
        rng = random.Random(cfg.seed)
        tasks: list[CalcChainTask] = []
        seen: set[str] = set()
        for _ in range(cfg.num_tasks * 20):  # bounded: a tiny difficulty range cannot loop forever
            if len(tasks) >= cfg.num_tasks:
                break
            steps = rng.randint(cfg.min_steps, cfg.max_steps)
            prompt, answer, world = generate(rng, steps, rng.randint(0, cfg.max_distractors))
            if prompt in seen:
                continue
            seen.add(prompt)
            task_id = f"calc-chain-train/{len(tasks)}"
            data = CalcChainData(
                id=task_id,
                name=task_id,
                prompt=prompt,
                system_prompt=SYSTEM_PROMPT,
                answer=answer,
                steps=steps,
                world=world,
            )
            tasks.append(CalcChainTask(data, cfg.task))
        return tasks
