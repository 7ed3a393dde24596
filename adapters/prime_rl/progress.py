"""Following a running prime-rl job: ``metrics.jsonl`` and the orchestrator / trainer logs -> progress.

Both the orchestrator and the trainer append ``{"step": N, "time": t, <metric>: value, ...}`` rows to
``<run dir>/metrics.jsonl`` (prime-rl's file monitor). The orchestrator's reward is
``train/agg/all/<agent>/reward/mean`` (``train/<env>/...`` per env), its error rate
``train/agg/all/has_error/mean``; the trainer's loss is ``loss/mean``. The log lines
(``Step 3 |   2.1s | Reward 0.4500 | ...`` and ``Step 3 | ... | Loss 0.0123 | ...``) carry the same numbers and
are the fallback when the metrics file is missing. A step is reported once per change of what is known
about it (reward and loss arrive from two processes at different times).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import msgspec

from handlers.ports.inner_trainer import Progress

from .classify import strip_ansi

__all__ = ["LineFollower", "StepState", "TrainTracker"]

_REWARD_AGG = re.compile(r"^train/agg/all/(?:.+/)?reward/mean$")
_REWARD_ANY = re.compile(r"^train/[^/]+/all/(?:.+/)?reward/mean$")
_HAS_ERROR = "train/agg/all/has_error/mean"
_ORCH_STEP = re.compile(r"\bStep (\d+) \|.*?\| Reward (-?[\d.]+(?:e-?\d+)?) \|.*?\bError ([\d.]+)%")
_TRAINER_STEP = re.compile(r"\bStep (\d+) \|.*?\| Loss (-?[\d.]+(?:e-?\d+)?|nan|inf)\b")
_PEAK_MEM = re.compile(r"Peak Mem\. ([\d.]+) GiB|Peak memory: ([\d.]+) GiB")
# Trainer metrics kept for the job result (the last value of each; peak memory: the max).
_KEPT = ("loss/mean", "entropy/all/mean", "mismatch_kl/all/mean", "optim/grad_norm", "optim/lr", "time/step")


class LineFollower:
    """Complete new lines of a growing file; the file may not exist yet (or be behind a symlink made later)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except (FileNotFoundError, NotADirectoryError):
            return []
        self._offset += len(data)
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()  # an unterminated last line waits for its newline
        return [c.decode("utf-8", errors="replace") for c in chunks if c.strip()]


class StepState(msgspec.Struct, kw_only=True):
    step: int
    reward: float | None = None
    loss: float | None = None
    has_error: float | None = None


class TrainTracker:
    """What is known about each step so far, from metrics rows and log lines."""

    def __init__(self, total_steps: int) -> None:
        self.total_steps = total_steps
        self.steps: dict[int, StepState] = {}
        self.kept: dict[str, float] = {}
        self.peak_memory_gib: float | None = None
        self._reported: dict[int, tuple[float | None, float | None]] = {}

    def _state(self, step: int) -> StepState:
        return self.steps.setdefault(step, StepState(step=step))

    def _peak(self, value: float) -> None:
        self.peak_memory_gib = value if self.peak_memory_gib is None else max(self.peak_memory_gib, value)

    def feed_metrics_line(self, line: str) -> None:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            return  # a torn line: the next read has the rest only if it was unterminated, else skip it
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            return
        state = self._state(row["step"])
        agg = next((k for k in row if _REWARD_AGG.match(k)), None)
        key = agg or next((k for k in row if _REWARD_ANY.match(k)), None)
        if key is not None and isinstance(row[key], int | float):
            state.reward = float(row[key])
        if isinstance(row.get(_HAS_ERROR), int | float):
            state.has_error = float(row[_HAS_ERROR])
        if isinstance(row.get("loss/mean"), int | float):
            state.loss = float(row["loss/mean"])
        for name in _KEPT:
            if isinstance(row.get(name), int | float):
                self.kept[name] = float(row[name])
        if isinstance(row.get("perf/peak_memory"), int | float):
            self._peak(float(row["perf/peak_memory"]))

    def feed_orchestrator_line(self, line: str) -> None:
        m = _ORCH_STEP.search(strip_ansi(line))
        if m:
            state = self._state(int(m.group(1)))
            if state.reward is None:
                state.reward = float(m.group(2))
            if state.has_error is None:
                state.has_error = float(m.group(3)) / 100.0

    def feed_trainer_line(self, line: str) -> None:
        text = strip_ansi(line)
        m = _TRAINER_STEP.search(text)
        if m:
            state = self._state(int(m.group(1)))
            loss = float(m.group(2))
            if state.loss is None and math.isfinite(loss):
                state.loss = loss
        if mem := _PEAK_MEM.search(text):
            self._peak(float(mem.group(1) or mem.group(2)))

    @property
    def last_step(self) -> int:
        return max(self.steps, default=0)

    def pending_progress(self) -> list[Progress]:
        """A Progress for every step whose known (reward, loss) changed since it was last reported."""
        out = []
        for step in sorted(self.steps):
            s = self.steps[step]
            known = (s.reward, s.loss)
            if known == (None, None) or self._reported.get(step) == known:
                continue
            self._reported[step] = known
            parts = [f"step {step}/{self.total_steps}"]
            if s.reward is not None:
                parts.append(f"reward {s.reward:.4f}")
            if s.loss is not None:
                parts.append(f"loss {s.loss:.4f}")
            out.append(
                Progress(
                    phase="train",
                    step=step,
                    total_steps=self.total_steps,
                    reward=s.reward,
                    loss=s.loss,
                    message=", ".join(parts),
                )
            )
        return out

    def all_errors_for(self, steps: int) -> bool:
        """Whether the last ``steps`` steps (consecutive, all with an error rate) had every rollout fail."""
        rates = [self.steps[s].has_error for s in sorted(self.steps)[-steps:]]
        return len(rates) >= steps and all(r is not None and r >= 0.999 for r in rates)

    def summary(self) -> dict[str, float]:
        """Figures for the job result: steps done, first/last reward, last loss, peak memory, last metrics."""
        out = dict(self.kept)
        out["steps_done"] = float(self.last_step)
        rewards = [s.reward for _, s in sorted(self.steps.items()) if s.reward is not None]
        if rewards:
            out["reward_first"] = rewards[0]
            out["reward_last"] = rewards[-1]
        losses = [s.loss for _, s in sorted(self.steps.items()) if s.loss is not None]
        if losses:
            out["loss_last"] = losses[-1]
        if self.peak_memory_gib is not None:
            out["peak_memory_gib"] = self.peak_memory_gib
        return out
