"""ledger-train: a verifiers v1 training environment for stateful bookkeeping through bank tools.

A task reads like ``Accounts: alice, bob, carol. In order: deposit 40 to alice; transfer 25 from bob to alice;
withdraw 100 from carol. Skip any operation the bank rejects. What is alice's final balance?``. The starting
balances exist only in the bank, so the model must act through the tools (``get_balance``, ``deposit``,
``withdraw``, ``transfer``: exactly the hidden eval's tool interface, served from ``tools.py``), notice the
operations the bank rejects (``error: insufficient funds, ...``), and end with ``<answer>185</answer>``.

Per-rollout bank state. The tools are served by ONE shared tool server for all rollouts (far cheaper than a
server per rollout), so a rollout's balances cannot live in the server process. They live in verifiers'
per-rollout state channel instead: ``Task.setup`` puts the task's starting balances into ``trace.state``
(a ``BankState``); before each tool call the server pulls the calling rollout's state, the tool changes it,
and the server pushes it back. Rollouts never see each other's balances.

Tasks are generated here from a seeded ``random.Random``: 1..6 operations over 2..5 accounts, about one
withdrawal or transfer in five designed to be rejected (just above the balance). Duplicate prompts are skipped.

Reward ``reward`` (weight 1): ``rubric.score(reply, gold)``, the one file in which the replica's four
environments (envs/correct, envs/partial, envs/everything, envs/wrong) differ.
"""

from __future__ import annotations

import random
import re
from typing import Any

import verifiers.v1 as vf

from .rubric import score

__all__ = ["LedgerTaskset"]

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
# Task generator: the bank's rule (reject a withdrawal or transfer above the balance) applied to compute the gold.
# ---------------------------------------------------------------------------------------------------------------
_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "kate", "liam")
_MAX_BALANCE = 999
_REJECT_RATE = 0.2


def _amount(rng: random.Random, balance: int, reject: bool) -> int:
    """A withdrawal/transfer amount: just above ``balance`` when it should be rejected (or the balance is tiny)."""
    if reject or balance < 5:
        return balance + 5 * rng.randint(1, 6)
    return 5 * rng.randint(1, min(balance, 150) // 5)


def _phrase(op: list[Any]) -> str:
    if op[0] == "deposit":
        return f"deposit {op[2]} to {op[1]}"
    if op[0] == "withdraw":
        return f"withdraw {op[2]} from {op[1]}"
    return f"transfer {op[3]} from {op[1]} to {op[2]}"


def generate(rng: random.Random, steps: int, extra_accounts: int) -> tuple[str, str, dict[str, Any]]:
    """One task: (prompt, gold answer, world). The world holds the starting balances, operations and target."""
    accounts = sorted(rng.sample(_NAMES, 2 + extra_accounts))
    start = {a: 5 * rng.randint(2, 40) for a in accounts}
    state = dict(start)
    ops: list[list[Any]] = []
    for _ in range(steps):
        kind = rng.choices(("deposit", "withdraw", "transfer"), weights=(3, 3, 4))[0]
        if kind == "deposit":
            acct = rng.choice(accounts)
            amount = 5 * rng.randint(1, 20)
            if state[acct] + amount <= _MAX_BALANCE:
                state[acct] += amount
                ops.append(["deposit", acct, amount])
                continue
            kind = "withdraw"  # too rich to deposit into: withdraw instead
        reject = rng.random() < _REJECT_RATE
        if kind == "withdraw":
            acct = rng.choice(accounts)
            amount = _amount(rng, state[acct], reject)
            ops.append(["withdraw", acct, amount])
            if amount <= state[acct]:
                state[acct] -= amount
        else:
            src, dst = rng.sample(accounts, 2)
            amount = _amount(rng, state[src], reject)
            ops.append(["transfer", src, dst, amount])
            if amount <= state[src]:
                state[src] -= amount
                state[dst] += amount
    touched = sorted({name for op in ops for name in op[1:-1]})
    target = rng.choice(touched)
    prompt = (
        f"Accounts: {', '.join(accounts)}. In order: {'; '.join(_phrase(op) for op in ops)}. "
        f"Skip any operation the bank rejects. What is {target}'s final balance?"
    )
    return prompt, str(state[target]), {"balances": start, "ops": ops, "target": target}


# ---------------------------------------------------------------------------------------------------------------
# Verifiers classes.
# ---------------------------------------------------------------------------------------------------------------
class BankState(vf.State):
    """One rollout's bank: the balances as the model's tool calls have left them."""

    balances: dict[str, int] = {}


class LedgerData(vf.TaskData):
    answer: str  # the gold final balance of the asked account, e.g. "185"
    steps: int  # number of operations
    world: dict[str, Any] = {}  # starting balances, the operations, the asked account


class LedgerTaskConfig(vf.TaskConfig):
    pass


class LedgerTask(vf.Task[LedgerData, BankState, LedgerTaskConfig]):
    @property
    def key(self) -> str:
        return str(self.data.id)

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        # A fresh copy per rollout: the shared tool server reads and updates it through the state channel.
        trace.state = BankState(balances=dict(self.data.world["balances"]))

    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        return score(trace.last_reply or "", self.data.answer)

    @vf.metric
    async def answer_tag(self, trace: vf.Trace) -> float:
        return float(bool(_ANSWER_RE.search(trace.last_reply or "")))


class LedgerConfig(vf.TasksetConfig):
    num_tasks: int = 2000
    seed: int = 4242
    min_steps: int = 1
    max_steps: int = 6
    max_extra_accounts: int = 3
    task: LedgerTaskConfig = LedgerTaskConfig()
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class LedgerTaskset(vf.Taskset[LedgerTask, LedgerConfig]):
    @classmethod
    def toolsets(cls, config: LedgerConfig) -> list[vf.Toolset]:
        # Imported here: verifiers runs tools.py as `python -m ledger_train.tools`, and importing it at the top of
        # this module would load it twice in the tool server.
        from .tools import BankTools

        return [BankTools(config.tools)]  # one shared server; per-rollout balances travel in the state channel

    def load(self) -> list[LedgerTask]:
        cfg = self.config
        rng = random.Random(cfg.seed)
        tasks: list[LedgerTask] = []
        seen: set[str] = set()
        for _ in range(cfg.num_tasks * 20):  # bounded: a tiny difficulty range cannot loop forever
            if len(tasks) >= cfg.num_tasks:
                break
            steps = rng.randint(cfg.min_steps, cfg.max_steps)
            prompt, answer, world = generate(rng, steps, rng.randint(0, cfg.max_extra_accounts))
            if prompt in seen:
                continue
            seen.add(prompt)
            task_id = f"ledger-train/{len(tasks)}"
            data = LedgerData(
                id=task_id,
                name=task_id,
                prompt=prompt,
                system_prompt=SYSTEM_PROMPT,
                answer=answer,
                steps=steps,
                world=world,
            )
            tasks.append(LedgerTask(data, cfg.task))
        return tasks
