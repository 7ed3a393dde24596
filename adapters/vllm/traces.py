"""Reading a verifiers eval's ``traces.jsonl`` into a score, without trusting the exit code.

``vf-eval`` exits 0 even when every rollout failed (a dead server, a crashed tool server), so the score
comes from the episodes: one JSON line per episode ``{id, ok, errors, traces: [trace], ...}``, each trace
``{ok, errors: [{type, message}], stop_condition, rewards: {name: {score, weight}}, task: {data: {id}}}``.
A trace's reward is ``sum(score * weight)`` (``trace.reward`` is a property and is not serialised); a
``None`` score means its scoring raised. An episode is *errored* when the episode or any of its traces is
not ok, has errors, or has an unscored reward; errored episodes count 0 in the score and are counted
separately, so a caller can refuse a score that is mostly infrastructure failure.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["EpisodeOutcome", "EvalOutcome", "TracesError", "parse_traces", "summarise"]


class TracesError(ValueError):
    """A traces file that cannot be read as verifiers episodes; names the file and line."""


class EpisodeOutcome(msgspec.Struct, frozen=True, kw_only=True):
    task_id: str
    reward: float  # 0.0 when errored
    errored: bool
    error_types: tuple[str, ...] = ()
    stop_condition: str = ""


class EvalOutcome(msgspec.Struct, frozen=True, kw_only=True):
    n: int
    score: float  # mean reward over all n episodes, errored ones counting 0
    errored: int
    error_types: dict[str, int]
    rewards: list[float]
    task_ids: list[str]
    first_error: str = ""

    @property
    def error_fraction(self) -> float:
        return self.errored / self.n if self.n else 1.0


def _trace_reward(trace: dict[str, Any]) -> float | None:
    rewards = trace.get("rewards") or {}
    total = 0.0
    for entry in rewards.values():
        score = entry.get("score") if isinstance(entry, dict) else None
        if score is None:
            return None
        total += float(score) * float(entry.get("weight", 1.0))
    return total


def _episode(raw: dict[str, Any]) -> tuple[EpisodeOutcome, str]:
    traces = raw.get("traces") or []
    errors: list[dict[str, Any]] = list(raw.get("errors") or [])
    errored = not raw.get("ok", False) or bool(errors) or not traces
    reward = 0.0
    stop = ""
    task_id = str(raw.get("task", {}).get("data", {}).get("id", "")) if isinstance(raw.get("task"), dict) else ""
    for trace in traces:
        errors += trace.get("errors") or []
        stop = str(trace.get("stop_condition") or stop)
        task_id = task_id or str(trace.get("task", {}).get("data", {}).get("id", ""))
        value = _trace_reward(trace)
        if not trace.get("ok", False) or value is None:
            errored = True
        reward += value or 0.0
    if traces:
        reward /= len(traces)
    types = tuple(str(e.get("type", "error")) for e in errors if isinstance(e, dict))
    first = next((f"{e.get('type')}: {e.get('message', '')}"[:300] for e in errors if isinstance(e, dict)), "")
    if errored and not first:
        first = f"episode not ok (stop={stop or 'none'})"
    outcome = EpisodeOutcome(
        task_id=task_id or str(raw.get("id", "")),
        reward=0.0 if errored else reward,
        errored=errored,
        error_types=types,
        stop_condition=stop,
    )
    return outcome, first


def summarise(episodes: list[EpisodeOutcome], first_error: str = "") -> EvalOutcome:
    rewards = [e.reward for e in episodes]
    counts = Counter(t for e in episodes if e.errored for t in (e.error_types or ("not_ok",)))
    return EvalOutcome(
        n=len(episodes),
        score=sum(rewards) / len(rewards) if rewards else 0.0,
        errored=sum(e.errored for e in episodes),
        error_types=dict(sorted(counts.items())),
        rewards=rewards,
        task_ids=[e.task_id for e in episodes],
        first_error=first_error,
    )


def parse_traces(path: Path | str) -> EvalOutcome:
    """Every episode of a ``traces.jsonl``; a line that is not an episode is a :class:`TracesError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TracesError(f"{p}: cannot read: {exc.strerror}") from None
    episodes: list[EpisodeOutcome] = []
    first_error = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TracesError(f"{p}:{lineno}: not JSON: {exc.msg}") from None
        if not isinstance(raw, dict) or "traces" not in raw:
            raise TracesError(f"{p}:{lineno}: not a verifiers episode (no 'traces')")
        outcome, err = _episode(raw)
        episodes.append(outcome)
        first_error = first_error or err
    return summarise(episodes, first_error)
