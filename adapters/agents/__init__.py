"""Agent policies: where the trainer agent's turns come from (a recorded script, an OpenAI-compatible API)."""

from __future__ import annotations

from .scripted import ScriptedPolicy, ScriptError, load_trajectory

__all__ = ["ScriptError", "ScriptedPolicy", "load_trajectory"]
