"""A fake trainer-agent policy at the :class:`~handlers.ports.policy.AgentPolicy` port.

``FakePolicy()`` answers every turn with one ``list_files`` call and the text ``turn N`` (N counting from 1);
``FakePolicy(script)`` replays the given replies in order instead. Either raises :class:`PolicyError` once
``limit`` turns (the script's length, by default) have been answered. ``skip_to`` continues at a later turn, as
a resumed episode does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from handlers.ports.policy import AgentReply, PolicyError, ToolCall

__all__ = ["FakePolicy"]


class FakePolicy:
    name = "fake"
    model = "fake"  # unpriced

    def __init__(self, script: Sequence[AgentReply] | None = None, *, limit: int | None = None) -> None:
        self.script = list(script) if script is not None else None
        self.limit = limit if limit is not None or script is None else len(script)
        self.turn = 0
        self.seen: list[list[dict[str, Any]]] = []  # the conversation of every call

    def skip_to(self, turn: int) -> None:
        self.turn = turn

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply:
        if self.limit is not None and self.turn >= self.limit:
            raise PolicyError(f"fake policy: no turn {self.turn} (limit {self.limit})")
        self.seen.append(list(messages))
        self.turn += 1
        if self.script is not None:
            return self.script[self.turn - 1]
        call = ToolCall(id=f"c{self.turn}", name="list_files", arguments="{}")
        return AgentReply(content=f"turn {self.turn}", tool_calls=[call], finish_reason="tool_calls")
