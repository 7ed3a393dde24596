"""$env_id: the training environment for this task (a verifiers v1 taskset). SKELETON: complete it.

What the trainer does with this package: it loads ``TrainTaskset`` (the one ``vf.Taskset`` in ``__all__``),
asks the model each task's ``prompt`` with the tools from ``tools.py``, and rewards each rollout with the
``@vf.reward`` methods of ``TrainTask``. So:

1. ``generate()`` must produce training tasks of the same kind as the dev examples (``dev_examples.json``):
   same prompt style, same tools needed, with a gold ``answer`` for each. It returns nothing yet, so this
   skeleton loads zero tasks and fails validation until you write it.
2. ``tools.py`` must serve exactly the eval tool interface (INSTRUCTIONS.md, ``task_spec.json`` ``tools``):
   the model is scored with those tools, so it must practise with them.
3. ``TrainTask.correct`` must score 1.0 for a right final answer and 0.0 for a wrong one, reading the answer
   the way the eval does (``extract_answer`` below). It returns 0.0 for everything yet.

Rules: only the standard library and ``verifiers`` (and pydantic, which verifiers is built on); no network,
no files outside this package, no copies of the dev examples as the training set. verifiers 0.4.0 notes:
rewards and metrics must be ``async def``; ``TaskData`` is a frozen pydantic model (add typed fields, give
mutable fields a default); never override ``Taskset.__init__``; there is no ``load_environment()`` in v1.
"""

from __future__ import annotations

import random
import re
from typing import Any

import verifiers.v1 as vf

# Exactly one vf.Taskset subclass may be exported: that is how verifiers finds this environment.
__all__ = ["TrainTaskset"]

# The hidden eval's system prompt (``system_prompt`` in task_spec.json): train with the same one.
SYSTEM_PROMPT = "TODO: copy system_prompt from task_spec.json"

# ---------------------------------------------------------------------------------------------------------------
# Reading the final answer the way the eval does: the text inside the LAST <answer>...</answer> tag, or, without
# a tag, the whole reply minus any <think>...</think> block. Then compare it with the gold answer after the same
# normalisation the eval applies (see "scoring" in task_spec.json: e.g. numbers by value, names ignoring case).
# ---------------------------------------------------------------------------------------------------------------
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def extract_answer(reply: str) -> str:
    """The text in the last <answer> tag, else the whole reply without <think> blocks."""
    tags = _ANSWER_RE.findall(reply)
    if tags:
        return str(tags[-1]).strip()
    return _THINK_RE.sub("", reply).strip()


# ---------------------------------------------------------------------------------------------------------------
# Task generator: write it. Use only `rng` for randomness, so the same seed always gives the same tasks.
# ---------------------------------------------------------------------------------------------------------------
def generate(rng: random.Random) -> tuple[str, str, dict[str, Any]] | None:
    """One training task as (prompt, gold answer, world), or None.

    ``world`` is whatever the tools need to answer for this task (records to look up, starting balances, ...);
    an empty dict when the tools are pure functions. TODO: return real tasks; None means "no task" (this
    skeleton generates none).
    """
    return None


# ---------------------------------------------------------------------------------------------------------------
# The verifiers classes.
# ---------------------------------------------------------------------------------------------------------------
class WorldState(vf.State):
    """One rollout's tool state (verifiers' per-rollout state channel).

    All rollouts share ONE tool server (much cheaper than one per rollout), so anything the tools need about
    the rollout's own task goes here: ``TrainTask.setup`` fills it, and in ``tools.py`` a tool reads (and may
    change) it as ``self.state``. Changes are saved after each call, so a stateful tool (balances, an
    inventory) simply edits it. Add typed fields with defaults; remove nothing.
    """

    world: dict[str, Any] = {}


class TrainData(vf.TaskData):
    """One task. Inherited fields you set: ``id``, ``name``, ``prompt``, ``system_prompt``."""

    answer: str  # the gold answer, compared with the model's final answer by the reward
    world: dict[str, Any] = {}  # what the tools need for this task (copied into WorldState at setup)


class TrainTaskConfig(vf.TaskConfig):
    """Run-time knobs of a task (none needed)."""


class TrainTask(vf.Task[TrainData, WorldState, TrainTaskConfig]):
    @property
    def key(self) -> str:
        return str(self.data.id)  # a durable, unique id per task (set in load)

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        # A fresh copy per rollout, so rollouts of the same task never see each other's changes.
        trace.state = WorldState(world=dict(self.data.world))

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1.0 when the model's final answer is right, else 0.0. TODO: implement."""
        reply = trace.last_reply or ""  # the model's final message
        _answer = extract_answer(reply)
        # TODO: normalise _answer and self.data.answer as the eval does, and compare them.
        return 0.0

    @vf.metric
    async def answer_tag(self, trace: vf.Trace) -> float:
        """Logged, never rewarded: whether the final reply used the <answer> tag."""
        return float(bool(_ANSWER_RE.search(trace.last_reply or "")))


class TrainConfig(vf.TasksetConfig):
    """Load-time knobs; job.toml's [env] num_tasks sets ``num_tasks``."""

    num_tasks: int = 1000
    seed: int = 0
    task: TrainTaskConfig = TrainTaskConfig()
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class TrainTaskset(vf.Taskset[TrainTask, TrainConfig]):
    @classmethod
    def toolsets(cls, config: TrainConfig) -> list[vf.Toolset]:
        # Imported here, not at the top: verifiers runs tools.py as its own process (`python -m $module.tools`),
        # and a top-level import would load that module twice there.
        from .tools import TrainTools

        return [TrainTools(config.tools)]  # one tool server shared by every rollout

    def load(self) -> list[TrainTask]:
        rng = random.Random(self.config.seed)
        tasks: list[TrainTask] = []
        for i in range(self.config.num_tasks):
            drawn = generate(rng)
            if drawn is None:
                break  # the skeleton's generate() makes no tasks
            prompt, answer, world = drawn
            data = TrainData(
                id=f"$env_id/{i}",
                name=f"$env_id/{i}",
                prompt=prompt,
                system_prompt=SYSTEM_PROMPT,
                answer=answer,
                world=world,
            )
            tasks.append(TrainTask(data, self.config.task))
        return tasks
