"""One session fixture runs every sandboxed scenario once per probe path (two at a time) and shares the reports.

``probe_runs`` is parametrized over the cold path (a bubblewrap sandbox per submission) and the warm one (a
confined fork of the zygote), so every test that reads it holds for both.

Each validation pays a verifiers import (5-9 CPU-seconds) in its sandbox, so the good env, the targeted bad
envs and the hostile envs are validated together here and the tests only assert on the reports. The
engine side of the hostile scenarios lives here too: a fake API key in this process's environment, a TCP
service on the host's 127.0.0.1 that counts connections, files the sandbox must not reach.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.probe import ProbeLimits, ProbeValidator
from families import get_family, hidden_tasks
from families.spec import TaskSpec, load_spec
from handlers.ports.validator import ProbeReport

from . import scenarios as sc

FAST = ProbeLimits(import_s=20, load_s=20, tools_s=20, rubric_s=20)
SHORT = ProbeLimits(import_s=6, load_s=6, tools_s=6, rubric_s=6, wall_s=200)


@dataclass
class Run:
    report: ProbeReport
    workspace: Path
    seconds: float
    context: dict[str, Any] = field(default_factory=dict)

    def check(self, name: str) -> Any:
        return next(c for c in self.report.checks if c.name == name)


@dataclass
class Host:
    """What the hostile envs aim at, on the engine side."""

    root: Path
    port: int = 0
    connections: int = 0
    outside: Path = field(init=False)  # a directory; each hostile scenario aims at outside/<its name>
    key: Path = field(init=False)
    rundir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.outside = self.root / "outside"
        self.outside.mkdir(parents=True)
        self.key = self.root / "keys" / "install.key"
        self.key.parent.mkdir()
        self.key.write_text("installation-key-secret")
        self.key.chmod(0o600)
        self.rundir = self.root / "runs" / "r1"
        self.rundir.mkdir(parents=True)
        (self.rundir / "events.jsonl").write_text("{}\n")


@dataclass
class Scenario:
    name: str
    workspace: Path
    limits: ProbeLimits = FAST
    isolation: str = "auto"
    preimport: bool = True  # False for import-time attacks placed before the env's own verifiers import


def _scenarios(tmp: Path, host: Host) -> list[Scenario]:
    family = get_family("calc_chain")
    hidden = [(t.prompt, t.answer) for t in hidden_tasks(family)[:3]]

    def ws(name: str, **kw: Any) -> Path:
        return sc.make_workspace(tmp, name, **kw)

    def exfil(name: str) -> Path:
        code = sc.exfiltrate(
            port=host.port, outside=host.outside / name, original_ws=tmp / name, key=host.key, rundir=host.rundir
        )
        return ws(name, prelude=code, early=True)

    early = ProbeLimits(import_s=8, wall_s=60)
    return [
        Scenario("good", ws("good"), ProbeLimits()),
        Scenario("reward_loop", ws("reward_loop", replace=sc.REWARD_LOOP), SHORT),
        Scenario("two_tasksets", ws("two_tasksets", replace=sc.TWO_TASKSETS)),
        Scenario("hidden_tasks", ws("hidden_tasks", replace=sc.hidden_tasks_env(hidden))),
        Scenario("prefixed_tools", ws("prefixed_tools", replace=sc.PREFIXED_TOOLS)),
        Scenario("constant_reward", ws("constant_reward", replace=sc.CONSTANT_REWARD)),
        Scenario("exfil", exfil("exfil"), early, preimport=False),
        Scenario("exfil_unshare", exfil("exfil_unshare"), early, "unshare", preimport=False),
        Scenario(
            "imports_families", ws("imports_families", prelude=sc.IMPORTS_FAMILIES, early=True), early, preimport=False
        ),
        Scenario(
            "memory_hog",
            ws("memory_hog", prelude=sc.MEMORY_HOG, early=True),
            ProbeLimits(memory_bytes=1 << 30, import_s=30),
            preimport=False,
        ),
        Scenario("import_loop", ws("import_loop", prelude=sc.IMPORT_LOOP, early=True), SHORT, preimport=False),
        Scenario("crash", ws("crash", prelude=sc.IMPORT_CRASH, early=True), early, preimport=False),
    ]


async def _run_all(tmp: Path, spec: TaskSpec, path: str) -> dict[str, Run]:
    host = Host(tmp / "host")

    async def service(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host.connections += 1
        writer.write(b"host-service-banner\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(service, "127.0.0.1", 0)
    host.port = server.sockets[0].getsockname()[1]
    runs: dict[str, Run] = {}
    gate = asyncio.Semaphore(2)

    async def one(s: Scenario) -> None:
        async with gate:
            started = time.monotonic()
            validator = ProbeValidator(
                limits=s.limits,
                isolation=s.isolation,  # type: ignore[arg-type]
                preimport=s.preimport,
                unsafe_no_sandbox=s.isolation != "auto",  # a forced weaker mode runs only by explicit opt-in
                path=path,  # type: ignore[arg-type]
            )
            report = await validator.validate(s.workspace, spec, 1)
            runs[s.name] = Run(report, s.workspace, time.monotonic() - started, {"host": host, "path": path})

    async with server:
        await asyncio.gather(*(one(s) for s in _scenarios(tmp, host)))
        # The fork bomb alone: 64 spinning processes would slow every neighbour down.
        bomb = sc.make_workspace(tmp, "fork_bomb", prelude=sc.FORK_BOMB, early=True)
        await one(Scenario("fork_bomb", bomb, SHORT, preimport=False))
    return runs


@pytest.fixture(scope="session", params=["cold", "warm"])
def probe_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = sc.FAKE_KEY  # the sandboxed env must never see it
    try:
        runs = asyncio.run(_run_all(tmp_path_factory.mktemp("probe"), load_spec(sc.SPEC), request.param))
    finally:
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved
    yield runs


@pytest.fixture(scope="session")
def calc_spec() -> TaskSpec:
    return load_spec(sc.SPEC)
