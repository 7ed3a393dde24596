"""The bank tools, exactly as the hidden eval serves them (names, parameters, descriptions, results).

verifiers starts this module as its own process (``python -m ledger_train.tools``): one server shared by all
rollouts. ``self.state`` is the calling rollout's ``BankState``, pulled from its state channel before the call
and pushed back after it, so a tool simply reads and changes ``self.state.balances``. A rejected request
(unknown account, non-positive amount, insufficient funds) changes nothing and returns ``error: ...`` as the
result text, as in the eval.
"""

# No `from __future__ import annotations` here: the tool server builds each tool's schema from its annotations at
# run time, and string annotations it cannot resolve (Literal, Annotated) would break it.
from typing import Annotated

import verifiers.v1 as vf
from pydantic import Field

from . import BankState

__all__ = ["BankTools"]


class BankTools(vf.Toolset[vf.SharedToolsetConfig, BankState]):
    TOOL_PREFIX = None  # bare tool names (deposit, not bank_tools_deposit), as in the eval

    def _check(self, *accounts: str, amount: int | None = None) -> str | None:
        """The eval's rejection message for this request, or None when it is acceptable."""
        if amount is not None and amount <= 0:
            return "error: amount must be positive"
        for name in accounts:
            if name not in self.state.balances:
                return f"error: no account named {name!r}"
        return None

    @vf.tool
    def get_balance(self, account: Annotated[str, Field(description="the account name")]) -> str:
        """Return the current balance of an account."""
        return self._check(account) or str(self.state.balances[account])

    @vf.tool
    def deposit(
        self,
        account: Annotated[str, Field(description="the account name")],
        amount: Annotated[int, Field(description="how much to deposit")],
    ) -> str:
        """Add money to an account and return its new balance."""
        if error := self._check(account, amount=amount):
            return error
        balances = self.state.balances
        balances[account] += amount
        return f"ok, {account}: {balances[account]}"

    @vf.tool
    def withdraw(
        self,
        account: Annotated[str, Field(description="the account name")],
        amount: Annotated[int, Field(description="how much to withdraw")],
    ) -> str:
        """Take money out of an account; rejected if the amount is above the balance."""
        if error := self._check(account, amount=amount):
            return error
        balances = self.state.balances
        if amount > balances[account]:
            return f"error: insufficient funds, {account} has {balances[account]}"
        balances[account] -= amount
        return f"ok, {account}: {balances[account]}"

    @vf.tool
    def transfer(
        self,
        source: Annotated[str, Field(description="the account to take money from")],
        target: Annotated[str, Field(description="the account to pay into")],
        amount: Annotated[int, Field(description="how much to move")],
    ) -> str:
        """Move money between accounts; rejected if the amount is above the source balance."""
        # The eval checks in this order: amount, target, same account, source, funds.
        if error := self._check(target, amount=amount):
            return error
        if source == target:
            return "error: source and target must differ"
        if error := self._check(source):
            return error
        balances = self.state.balances
        if amount > balances[source]:
            return f"error: insufficient funds, {source} has {balances[source]}"
        balances[source] -= amount
        balances[target] += amount
        return f"ok, {source}: {balances[source]}, {target}: {balances[target]}"


if __name__ == "__main__":
    BankTools.run()
