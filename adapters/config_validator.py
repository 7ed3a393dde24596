"""A validator that checks job.toml only (parses; every ``[prime_rl]`` value inside the task's bounds) and runs
no agent code: ``[episode] validator = "job_config"`` in a run config.

It is the first check of the sandboxed probe (adapters/probe) and nothing more, so it accepts environment
packages the probe would reject. It exists for offline smoke runs and the crash-resume test, where the probe's
seconds per submission would dominate; a real outer run validates with the probe.
"""

from __future__ import annotations

import time
from pathlib import Path

from events import CheckResult
from families.spec import TaskSpec
from handlers.episode.job_config import JobConfigError, check_bounds, load_job_config
from handlers.ports.validator import ProbeReport

__all__ = ["JobConfigValidator"]


class JobConfigValidator:
    isolation = "none: job.toml checked in the engine, no agent code run"

    async def validate(self, workspace: Path, spec: TaskSpec, attempt: int) -> ProbeReport:
        t = time.monotonic()
        try:
            job = load_job_config(workspace / "job.toml")
        except FileNotFoundError:
            check = CheckResult(name="job_config", ok=False, detail="job.toml is missing from the workspace root")
            return ProbeReport(ok=False, checks=[check], seconds=0.0, parseable=False, isolation=self.isolation)
        except (JobConfigError, OSError, UnicodeDecodeError) as exc:
            detail = str(exc).replace(str(workspace) + "/", "")
            check = CheckResult(name="job_config", ok=False, detail=detail)
            return ProbeReport(ok=False, checks=[check], seconds=0.0, parseable=False, isolation=self.isolation)
        errs = check_bounds(job.prime_rl, spec.bounds)
        seconds = time.monotonic() - t
        detail = "; ".join(errs) if errs else "job.toml parses and is inside the task's bounds"
        check = CheckResult(name="job_config", ok=not errs, detail=detail, seconds=seconds)
        return ProbeReport(ok=not errs, checks=[check], seconds=seconds, parseable=True, isolation=self.isolation)
