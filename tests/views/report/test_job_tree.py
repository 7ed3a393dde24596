"""The report's job tree of a multi-job episode: job-2 under job-1, final marked, the job.toml diff between them."""

from __future__ import annotations

from pathlib import Path

from adapters.agents.scripted import load_trajectory
from tests.fakes.jobs import FakeJobs
from tests.handlers.episode.test_multi_job import OUTCOMES, TWO_JOBS, _run
from views.report.data import collect
from views.report.job_tree import bundle_diff
from views.report.markdown import markdown


async def test_report_shows_the_job_tree_with_the_diff(tmp_path: Path) -> None:
    _, run, _ = await _run(tmp_path, load_trajectory(TWO_JOBS), FakeJobs(OUTCOMES))
    text = markdown(collect(run), [])
    section = text[text.index("## Multi-job episodes") : text.index("## Errors")]
    assert "### ep-0 (finished; final: job-2)" in section
    assert "- `job-1` (ep-0-job-1): succeeded, hidden post 0.382, dev 0.250 → 0.125" in section
    assert "  - `job-2` **final** (ep-0-job-2): succeeded, hidden post 0.693, dev 0.250 → 0.500" in section
    assert "-learning_rate = 1e-4" in section and "+learning_rate = 1e-5" in section
    assert "env/" not in section.split("```diff", 1)[1].split("```", 1)[0]  # only job.toml changed


def test_bundle_diff_names_env_files_and_says_nothing_for_no_change() -> None:
    old = {"job.toml": b"a = 1\n", "env/x.py": b"print(1)\n"}
    assert bundle_diff(old, old) == []
    diff = bundle_diff(old, {**old, "env/x.py": b"print(2)\n", "env/y.py": b"new\n"})
    assert "--- a/env/x.py" in diff and "+print(2)" in diff and "+++ b/env/y.py" in diff
