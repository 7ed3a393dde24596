"""ledger: stateful account bookkeeping; balances change as the episode goes.

Example prompt: ``Accounts: alice, bob, carol. In order: deposit 40 to alice; transfer 25 from bob to
alice; withdraw 100 from carol. Skip any operation the bank rejects. What is alice's final balance?``
Starting balances are only in the bank (the tools), never in the prompt, so the model must act through
the tools: ``deposit(account="alice", amount=40)`` -> ``ok, alice: 160``, ..., a withdrawal or transfer
above the balance is rejected (``error: insufficient funds, carol has 60``) and changes nothing, and
``get_balance(account="alice")`` -> ``185`` gives the answer.

Knobs: ``steps`` = number of operations (1..8; default mix 2..5); ``distractors`` = accounts beyond the
two every task has (0..4; default mix 0..2): more accounts mean more operations that do not touch the
asked account but can still decide whether a later transfer into it is rejected. About one operation
in five is designed to be rejected. Tools are built per task with a fresh copy of the balances.
Scoring: exact integer match; no partial credit (a balance is right or wrong).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

from ._answer import normalise_number
from ._base import Difficulty, SolverStep, Task, ToolBox, ToolError
from ._family import Draw, FamilyBase

__all__ = ["Ledger"]

_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "kate", "liam")
_MAX_BALANCE = 999
_REJECT_RATE = 0.2


def _bank(balances: dict[str, int]) -> ToolBox:
    """The four tools over one mutable copy of ``balances``."""
    state = dict(balances)

    def _account(name: str) -> int:
        if name not in state:
            raise ToolError(f"no account named {name!r}")
        return state[name]

    def _positive(amount: int) -> None:
        if amount <= 0:
            raise ToolError("amount must be positive")

    def get_balance(account: str) -> str:
        """Return the current balance of an account.

        Args:
            account: the account name
        """
        return str(_account(account))

    def deposit(account: str, amount: int) -> str:
        """Add money to an account and return its new balance.

        Args:
            account: the account name
            amount: how much to deposit
        """
        _positive(amount)
        state[account] = _account(account) + amount
        return f"ok, {account}: {state[account]}"

    def withdraw(account: str, amount: int) -> str:
        """Take money out of an account; rejected if the amount is above the balance.

        Args:
            account: the account name
            amount: how much to withdraw
        """
        _positive(amount)
        if amount > _account(account):
            raise ToolError(f"insufficient funds, {account} has {state[account]}")
        state[account] -= amount
        return f"ok, {account}: {state[account]}"

    def transfer(source: str, target: str, amount: int) -> str:
        """Move money between accounts; rejected if the amount is above the source balance.

        Args:
            source: the account to take money from
            target: the account to pay into
            amount: how much to move
        """
        _positive(amount)
        _account(target)
        if source == target:
            raise ToolError("source and target must differ")
        if amount > _account(source):
            raise ToolError(f"insufficient funds, {source} has {state[source]}")
        state[source] -= amount
        state[target] += amount
        return f"ok, {source}: {state[source]}, {target}: {state[target]}"

    return ToolBox([get_balance, deposit, withdraw, transfer])


def _amount(rng: random.Random, balance: int, reject: bool) -> int:
    """An amount for a withdrawal/transfer: above ``balance`` when ``reject`` (or when it is under 5)."""
    if reject or balance < 5:  # just above the balance, so a careless model cannot tell it from a valid one
        return balance + 5 * rng.randint(1, 6)
    return 5 * rng.randint(1, min(balance, 150) // 5)


def _phrase(op: list[Any]) -> str:
    if op[0] == "deposit":
        return f"deposit {op[2]} to {op[1]}"
    if op[0] == "withdraw":
        return f"withdraw {op[2]} from {op[1]}"
    return f"transfer {op[3]} from {op[1]} to {op[2]}"


class Ledger(FamilyBase):
    name: ClassVar[str] = "ledger"
    held_out: ClassVar[bool] = False
    steps_range: ClassVar[tuple[int, int]] = (1, 8)
    distractors_range: ClassVar[tuple[int, int]] = (0, 4)

    def default_difficulty(self, rng: random.Random) -> Difficulty:
        return Difficulty(steps=rng.randint(2, 5), distractors=rng.randint(0, 2))

    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        accounts = sorted(rng.sample(_NAMES, 2 + difficulty.distractors))
        start = {a: 5 * rng.randint(2, 40) for a in accounts}
        state = dict(start)
        ops: list[list[Any]] = []
        for _ in range(difficulty.steps):
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
                if amount <= state[acct]:  # the bank's rule, whatever was intended
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
        world: dict[str, Any] = {"balances": start, "ops": ops, "target": target}
        return prompt, world, str(state[target])

    def tools(self, task: Task) -> ToolBox:
        return _bank(task.world["balances"])

    def normalise(self, answer: str) -> str:
        return normalise_number(answer)

    def solve(self, task: Task) -> Sequence[SolverStep]:
        box = self.tools(task)
        steps: list[SolverStep] = []
        for op in task.world["ops"]:
            if op[0] == "transfer":
                args: dict[str, Any] = {"source": op[1], "target": op[2], "amount": op[3]}
            else:
                args = {"account": op[1], "amount": op[2]}
            steps.append(SolverStep(tool=op[0], arguments=args, result=box.call(op[0], args)))
        args = {"account": task.world["target"]}
        balance = box.call("get_balance", args)
        steps.append(SolverStep(tool="get_balance", arguments=args, result=balance))
        steps.append(SolverStep(answer=balance))
        return steps
