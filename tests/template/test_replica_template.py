"""The CPU replica's workspace template (``examples/replica/template/``, docs/replica.md): rendered per task, short
instructions that state every fixed job.toml line, four env packages identical but for the rubric, and each of the
four choices a valid submission for the REAL sandboxed probe (rubric check reported, not enforced: see
``[episode] rubric_check``), while the default probe still rejects the two rubrics that cannot tell right from wrong.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.probe import ProbeValidator
from families.spec import TaskSpec, load_spec
from handlers.episode.choice import MODELS, RUBRICS, Choice, job_text
from handlers.episode.setup import template_files
from handlers.ports.validator import ProbeReport

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "examples" / "replica" / "template"
FAMILIES = ("calc_chain", "ledger", "triage")


def _spec(family: str) -> TaskSpec:
    return load_spec(ROOT / "examples" / "replica" / "tasks" / f"{family}_v1_fast.json")


def _files(family: str) -> dict[str, bytes]:
    return template_files(_spec(family), template_dir=TEMPLATE)


@pytest.mark.parametrize("family", FAMILIES)
def test_renders_four_packages_identical_but_for_the_rubric(family: str) -> None:
    files = _files(family)
    module = f"{family}_train"
    assert not any(p.startswith("_family") or "__module__" in p for p in files)
    assert "job.toml" not in files  # the agent writes it: a default would be a choice made for it
    per_rubric = {
        r: {p.removeprefix(f"envs/{r}/"): d for p, d in files.items() if p.startswith(f"envs/{r}/")} for r in RUBRICS
    }
    expected = {"pyproject.toml", f"{module}/__init__.py", f"{module}/tools.py", f"{module}/rubric.py"}
    for rubric, pkg in per_rubric.items():
        assert set(pkg) == expected, rubric
        assert (
            b"$" not in pkg["pyproject.toml"]
            and f'name = "{family.replace("_", "-")}-train"'.encode() in pkg["pyproject.toml"]
        )
    first = per_rubric["correct"]
    for rubric in RUBRICS[1:]:
        differ = {p for p in expected if per_rubric[rubric][p] != first[p]}
        assert differ == {f"{module}/rubric.py"}, rubric


def test_instructions_are_short_and_state_every_fixed_line() -> None:
    for family in FAMILIES:
        text = _files(family)["INSTRUCTIONS.md"].decode()
        assert len(text) < 1500 and "$" not in text
        for model in MODELS:
            assert f'"{model}"' in text
        for rubric in RUBRICS:
            assert f"`envs/{rubric}`" in text
        # Every line of every choice's job.toml is in the instructions, but for the choice's own two values.
        job = job_text(Choice(MODELS[0], "correct", "1e-05"), _spec(family))
        assert all(line in text for line in job.splitlines() if line), family


@pytest.fixture(scope="module")
def probe_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], ProbeReport]:
    """One workspace per rubric (calc_chain, the smaller model) through the real probe, both rubric settings.

    One probe per setting validates the four workspaces at once (its warm zygote imported verifiers once).
    """
    spec = _spec("calc_chain")
    files = _files("calc_chain")
    workspaces = {}
    for rubric in RUBRICS:
        ws = tmp_path_factory.mktemp(rubric)
        for rel, data in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_bytes(data)
        (ws / "job.toml").write_text(job_text(Choice(MODELS[0], rubric, "1e-05"), spec))
        workspaces[rubric] = ws

    async def run() -> dict[tuple[str, bool], ProbeReport]:
        out = {}
        for enforce in (False, True):
            probe = ProbeValidator(enforce_rubric=enforce, max_concurrent=2)
            rubrics = RUBRICS if not enforce else ("everything", "wrong")
            reports = await asyncio.gather(*(probe.validate(workspaces[r], spec, 1) for r in rubrics))
            out.update({(r, enforce): rep for r, rep in zip(rubrics, reports, strict=True)})
        return out

    return asyncio.run(run())


@pytest.mark.slow  # the real sandboxed probe, six submissions (~2 CPU-s each after one verifiers import)
@pytest.mark.parametrize("rubric", RUBRICS)
def test_every_choice_is_a_valid_submission_in_the_replica(
    probe_reports: dict[tuple[str, bool], ProbeReport], rubric: str
) -> None:
    report = probe_reports[(rubric, False)]
    failed = [(c.name, c.detail) for c in report.checks if not c.ok]
    assert report.ok and not failed, failed
    rubric_check = next(c for c in report.checks if c.name == "rubric")
    discerning = rubric in ("correct", "partial")
    assert rubric_check.detail.startswith("not enforced") != discerning, rubric_check.detail


@pytest.mark.slow
@pytest.mark.parametrize("rubric", ["everything", "wrong"])
def test_the_default_probe_still_rejects_the_rubrics_that_cannot_tell(
    probe_reports: dict[tuple[str, bool], ProbeReport], rubric: str
) -> None:
    report = probe_reports[(rubric, True)]
    assert [c.name for c in report.checks if not c.ok] == ["rubric"]
    detail = next(c.detail for c in report.checks if c.name == "rubric")
    assert "cannot tell a correct answer from a wrong one" in detail
