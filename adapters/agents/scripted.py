"""The scripted policy: replays a recorded trajectory, so an episode runs with no API key and no GPU.

A trajectory file is JSON: ``{"name": ..., "family": ..., "turns": [{"content": "...", "tool_calls":
[{"name": "write_file", "arguments": {...}}]}, ...]}``. Arguments may also be given as a raw string, to
record malformed calls exactly as a model might produce them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from handlers.ports.policy import AgentReply, PolicyError, ToolCall

__all__ = ["ScriptError", "ScriptedPolicy", "Trajectory", "load_trajectory"]


class ScriptError(ValueError):
    """A trajectory file that cannot be replayed; names the file and the turn."""


class ScriptedCall(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    arguments: dict[str, Any] | str = {}


class ScriptedTurn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    content: str = ""
    tool_calls: list[ScriptedCall] = []


class Trajectory(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    family: str
    description: str = ""
    turns: list[ScriptedTurn]


def load_trajectory(path: Path | str) -> Trajectory:
    p = Path(path)
    try:
        return msgspec.json.decode(p.read_bytes(), type=Trajectory)
    except msgspec.ValidationError as exc:
        raise ScriptError(f"{p}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ScriptError(f"{p}: not valid JSON: {exc}") from None


class ScriptedPolicy:
    model = "scripted"

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.name = f"scripted:{trajectory.name}"
        self._next = 0

    def skip_to(self, turn: int) -> None:
        """Continue an interrupted episode: the next reply is turn ``turn`` of the trajectory."""
        self._next = turn

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply:
        if self._next >= len(self.trajectory.turns):
            raise PolicyError(f"trajectory {self.trajectory.name!r} has no turn {self._next}")
        turn = self.trajectory.turns[self._next]
        calls = [
            ToolCall(
                id=f"call_{self._next}_{i}",
                name=c.name,
                arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
            )
            for i, c in enumerate(turn.tool_calls)
        ]
        self._next += 1
        finish = "tool_calls" if calls else "stop"
        return AgentReply(content=turn.content, tool_calls=calls, model=self.model, finish_reason=finish)
