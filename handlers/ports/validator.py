"""The validator port: check a submitted workspace and say, check by check, what the agent must fix."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import msgspec

from events import CheckResult
from families.spec import TaskSpec

__all__ = ["ProbeReport", "Validator", "nudge"]


class ProbeReport(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    checks: list[CheckResult]
    seconds: float
    parseable: bool  # job.toml parsed: the episode made a parseable submission
    isolation: str = ""  # what sandboxing was actually applied


class Validator(Protocol):
    async def validate(self, workspace: Path, spec: TaskSpec, attempt: int) -> ProbeReport: ...


def nudge(report: ProbeReport, attempt: int, max_attempts: int) -> str:
    """The tool result of a rejected submit_job: every failed check, then what to do next."""
    failed = [c for c in report.checks if not c.ok and c.ran]
    lines = [f"Validation failed (attempt {attempt} of {max_attempts}). Failed checks:"]
    lines += [f"- {c.name}: {c.detail}" for c in failed]
    # The checks an earlier failure kept from running, on one line: repeating why for each made the reply to a
    # bad job.toml seven entries long (too long for a small agent's context) for one mistake.
    if waiting := [c.name for c in report.checks if not c.ran]:
        lines.append(f"Not run until those pass: {', '.join(waiting)}.")
    left = max_attempts - attempt
    if left > 0:
        lines.append(
            f"Fix these, then call submit_job again ({left} attempt{'s' if left != 1 else ''} left; "
            "fewer attempts earn a higher reward)."
        )
    else:
        lines.append("No attempts are left; the episode ends without a training job.")
    return "\n".join(lines)
