"""The red-team envs, validated once per session (two at a time) through the real probe, reports shared.

``hostile`` is :mod:`.attack`'s env: every file, process, socket and key route at import time (names built at
run time so that only the sandbox can stop them). Before it runs, the same code runs as a plain child of the
test process (``control``), which must reach every target: a route whose target does not exist or is not
reachable without the sandbox fails there, so no sandboxed assertion can pass vacuously. The others: calling
the hidden scorer inside the reward, training on lightly edited hidden items. Import-time routes skip the
sandbox's verifiers pre-import (``preimport=False``) to keep the suite quick. ``redteam_runs`` is parametrized over
the probe's two paths, cold (a bubblewrap sandbox per submission) and warm (a confined fork of the zygote that
imported verifiers once), so every route is shown stopped on both.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.probe import ProbeLimits, ProbeValidator
from families import get_family, hidden_tasks
from families.spec import load_spec
from handlers.ports.validator import ProbeReport
from tests.adapters.prime_rl.conftest import eval_pkg_root  # noqa: F401  (the fixture, for test_redteam_pod)
from tests.adapters.probe import scenarios as sc
from tests.adapters.probe.scenarios import probe_result

from .attack import FAKE_SECRET, Host, Seen, attack_code, new_tag, run_control

EARLY = ProbeLimits(import_s=40, wall_s=90)
FULL = ProbeLimits(import_s=20, load_s=20, tools_s=20, rubric_s=20)


@dataclass
class Attempt:
    report: ProbeReport
    workspace: Path
    seconds: float
    seen: Seen | None = None  # the hostile env's outcomes (set by the fixture)
    path: str = "cold"  # the probe path asked for: "cold" or "warm"

    def check(self, name: str) -> Any:
        return next(c for c in self.report.checks if c.name == name)


RUBRIC_SCORER = {
    '        found = _ANSWER.findall(trace.last_reply or "")': (
        "        import importlib as _il\n"
        "        fam = _il.import_module('fam' + 'ilies')  # the hidden scorer\n"
        "        return fam.get_family('calc_chain').score(fam.hidden_tasks(fam.get_family('calc_chain'))[0], '')\n"
        '        found = _ANSWER.findall(trace.last_reply or "")'
    )
}


def near_dup_env(leaked: list[tuple[str, str]]) -> dict[str, str]:
    """load(): 40 honest tasks, then lightly edited hidden items (prefix + upper case), answers kept."""
    body = (
        "    def load(self) -> list[CalcTask]:\n"
        "        rng = random.Random(self.config.seed)\n"
        "        rows = [_draw(rng) for _ in range(40)]\n"
        f"        rows += [(p, rows[0][1], a) for p, a in {leaked!r}]\n"
        "        return [\n"
        "            CalcTask(CalcData(id=f'calc/{i}', prompt=p, system_prompt=SYSTEM_PROMPT, answer=a, world=w),\n"
        "                     self.config.task)\n"
        "            for i, (p, w, a) in enumerate(rows)\n"
        "        ]\n"
        "\n"
        "    def _unused_load(self) -> list[CalcTask]:\n"
    )
    return {"    def load(self) -> list[CalcTask]:\n": body}


def edited(prompt: str) -> str:
    return "Please solve this carefully.  " + prompt.upper()


Scenario = tuple[str, Path, ProbeLimits, bool]


def _scenarios(tmp: Path, host: Host, tag: str) -> list[Scenario]:
    hidden = hidden_tasks(get_family("calc_chain"))
    leaked = [(edited(t.prompt), t.answer) for t in hidden[:10]]

    def ws(name: str, **kw: Any) -> Path:
        return sc.make_workspace(tmp, name, **kw)

    return [
        ("hostile", ws("hostile", prelude=attack_code(host.targets(tag), finish="raise"), early=True), EARLY, False),
        ("rubric_scorer", ws("rubric_scorer", replace=RUBRIC_SCORER), FULL, True),
        ("near_dup", ws("near_dup", replace=near_dup_env(leaked)), FULL, True),
    ]


async def _run_all(scenarios: list[Scenario], path: str) -> dict[str, Attempt]:
    spec = load_spec(sc.SPEC)
    runs: dict[str, Attempt] = {}
    gate = asyncio.Semaphore(2)

    async def one(name: str, workspace: Path, limits: ProbeLimits, preimport: bool) -> None:
        async with gate:
            started = time.monotonic()
            validator = ProbeValidator(limits=limits, preimport=preimport, path=path)  # type: ignore[arg-type]
            report = await validator.validate(workspace, spec, 1)
            runs[name] = Attempt(report, workspace, time.monotonic() - started, path=path)

    await asyncio.gather(*(one(*s) for s in scenarios))
    return runs


@dataclass
class Hostile:
    """The engine side of the hostile env: its targets, the control run (no sandbox) and the probe's tag."""

    host: Host
    control: Seen
    probe_tag: str


@pytest.fixture(scope="session")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    # Not under /tmp: the sandbox's private /tmp would hide it whatever else it does.
    root = Path(tempfile.mkdtemp(prefix="ait-redteam-host-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    h = Host(root)
    yield h
    h.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def hostile(host: Host) -> Iterator[Hostile]:
    """The control run: the attack without any sandbox (its daemon's late write included)."""
    tag = new_tag("control")
    before = len(host.connections)
    got = run_control(host, tag)
    time.sleep(2.0)  # the daemon writes 1 s after its parent is gone
    control = Seen(got, host.written(tag), len(host.connections) - before, host.targets(tag))
    host.cleanup(tag)
    yield Hostile(host, control, new_tag("probe"))


@pytest.fixture(scope="session", params=["cold", "warm"])
def redteam_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, hostile: Hostile
) -> Iterator[dict[str, Attempt]]:
    path = str(request.param)
    tag = f"{hostile.probe_tag}-{path}"  # each path's run aims at targets of its own
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = FAKE_SECRET  # the engine holds an API key; the sandbox must never see it
    before = len(hostile.host.connections)
    try:
        runs = asyncio.run(_run_all(_scenarios(tmp_path_factory.mktemp("redteam"), hostile.host, tag), path))
    finally:
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved
    time.sleep(2.0)  # a surviving daemon would have written by now
    host = hostile.host
    detail = runs["hostile"].check("env_import").detail
    got = probe_result(detail) if "PROBE-RESULT " in detail else {}
    runs["hostile"].seen = Seen(got, host.written(tag), len(host.connections) - before, host.targets(tag))
    yield runs
    host.cleanup(tag)
