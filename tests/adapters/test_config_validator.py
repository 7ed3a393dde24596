"""The job.toml-only validator: accepts a job inside the task's bounds, rejects one outside (naming the key) or
a missing / unparseable job.toml, and says that it ran no agent code."""

from __future__ import annotations

from pathlib import Path

from adapters.config_validator import JobConfigValidator
from families.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json")
GOOD = (ROOT / "fixtures" / "envs" / "calc_chain" / "job.toml").read_text()


async def test_bounds_only(tmp_path: Path) -> None:
    v = JobConfigValidator()
    missing = await v.validate(tmp_path, SPEC, 1)
    assert not missing.ok and not missing.parseable and "missing" in missing.checks[0].detail
    (tmp_path / "job.toml").write_text(GOOD)
    ok = await v.validate(tmp_path, SPEC, 1)
    assert ok.ok and ok.parseable and "no agent code" in ok.isolation
    (tmp_path / "job.toml").write_text(GOOD.replace("learning_rate = ", "learning_rate = 9.0 #"))
    high = await v.validate(tmp_path, SPEC, 2)
    assert not high.ok and high.parseable and "learning_rate" in high.checks[0].detail
    (tmp_path / "job.toml").write_text("[prime_rl\n")
    assert not (await v.validate(tmp_path, SPEC, 3)).parseable
