"""The red-team envs that need the real sandbox, validated once per session (two at a time), reports shared.

Each env tries one route to the hidden eval from inside the validation probe: regenerating the hidden set
by importing ``families`` at run time (names built so the static scan cannot see them), reading the
installation key from disk, calling the hidden scorer inside its reward, and training on lightly edited
hidden items. Import-time routes skip the sandbox's verifiers pre-import (``preimport=False``) to keep the
suite quick; the two that need ``load()`` or the reward pay it once each.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.probe import ProbeLimits, ProbeValidator, detect_isolation
from families import get_family, hidden_tasks
from families.spec import load_spec
from handlers.ports.validator import ProbeReport
from tests.adapters.probe import scenarios as sc

HAS_BWRAP = detect_isolation().mode == "bwrap"
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap not installed (apt-get install -y bubblewrap)")
EARLY = ProbeLimits(import_s=8, wall_s=60)
FULL = ProbeLimits(import_s=20, load_s=20, tools_s=20, rubric_s=20)


@dataclass
class Attempt:
    report: ProbeReport
    workspace: Path
    seconds: float

    def check(self, name: str) -> Any:
        return next(c for c in self.report.checks if c.name == name)


def _result_code(tries: dict[str, str]) -> str:
    """Import-time code that runs each attempt and raises what it achieved (see scenarios.probe_result)."""
    lines = [
        "import importlib as _il, json as _j, os as _os, sys as _sys",
        "_r = {}",
        "def _try(name, fn):",
        "    try:",
        "        _r[name] = 'OK:' + repr(fn())[:200]",
        "    except BaseException as e:",
        "        _r[name] = 'ERR:' + type(e).__name__ + ':' + str(e)[:80]",
    ]
    lines += [f"_try({name!r}, lambda: {expr})" for name, expr in tries.items()]
    lines.append("raise RuntimeError('PROBE-RESULT ' + _j.dumps(_r))")
    return "\n".join(lines) + "\n"


def _split(path: Path) -> str:
    """A path as an expression the static scan cannot read as a literal (the sandbox must stop it)."""
    return " + ".join(repr(part) for part in ("/", *str(path).lstrip("/").split("/", 1)))


def regen_hidden_code() -> str:
    project = sc.PROJECT
    return _result_code(
        {
            "import_families": "_il.import_module('fam' + 'ilies').__file__",
            "with_project_path": (
                f"(_sys.path.insert(0, {_split(project)}), "
                "_sys.meta_path.__setitem__(slice(None), "
                "[f for f in _sys.meta_path if type(f).__name__ != '_Hidden']), "
                "_il.import_module('fam' + 'ilies').hidden_tasks)[2]"
            ),
            "read_generator": f"open({_split(project / 'families' / '_splits.py')}).read(40)",
        }
    )


def read_key_code(real_key: Path, default_key: Path) -> str:
    return _result_code(
        {
            "env_var": "_os.environ.get('AIT_EVAL_' + 'KEY_FILE', 'unset')",
            "real_key": f"open({_split(real_key)}).read()",
            "default_key": f"open({_split(default_key)}).read()",
            "home_key": "open(_os.path.expanduser('~/.config/ait/eval.key')).read()",
        }
    )


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


def _scenarios(tmp: Path) -> list[Scenario]:
    real_key = Path(os.environ["AIT_EVAL_KEY_FILE"]).resolve()
    default_key = tmp / "home" / ".config" / "ait" / "eval.key"  # a key outside the repository, as installed
    default_key.parent.mkdir(parents=True)
    default_key.write_text("ab" * 32 + "\n")
    default_key.chmod(0o600)
    hidden = hidden_tasks(get_family("calc_chain"))
    leaked = [(edited(t.prompt), t.answer) for t in hidden[:10]]

    def ws(name: str, **kw: Any) -> Path:
        return sc.make_workspace(tmp, name, **kw)

    return [
        ("regen_hidden", ws("regen_hidden", prelude=regen_hidden_code(), early=True), EARLY, False),
        ("read_key", ws("read_key", prelude=read_key_code(real_key, default_key), early=True), EARLY, False),
        ("rubric_scorer", ws("rubric_scorer", replace=RUBRIC_SCORER), FULL, True),
        ("near_dup", ws("near_dup", replace=near_dup_env(leaked)), FULL, True),
    ]


async def _run_all(scenarios: list[Scenario]) -> dict[str, Attempt]:
    spec = load_spec(sc.SPEC)
    runs: dict[str, Attempt] = {}
    gate = asyncio.Semaphore(2)

    async def one(name: str, workspace: Path, limits: ProbeLimits, preimport: bool) -> None:
        async with gate:
            started = time.monotonic()
            report = await ProbeValidator(limits=limits, preimport=preimport).validate(workspace, spec, 1)
            runs[name] = Attempt(report, workspace, time.monotonic() - started)

    await asyncio.gather(*(one(*s) for s in scenarios))
    return runs


@pytest.fixture(scope="session")
def redteam_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Attempt]]:
    yield asyncio.run(_run_all(_scenarios(tmp_path_factory.mktemp("redteam"))))
