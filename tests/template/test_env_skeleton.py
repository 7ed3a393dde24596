"""The workspace template's env package skeleton (``template/env/``), rendered for every task spec.

It must render cleanly (no placeholder left, the names the job and verifiers expect), import with the real
verifiers 0.4.0, and be visibly incomplete: no tasks, a placeholder tool, a reward that scores nothing, so
that an agent that submits it untouched is told exactly what is missing (the probe check is slow).
"""

from __future__ import annotations

import asyncio
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from adapters.probe import ProbeValidator
from families.spec import TaskSpec, load_spec
from handlers.episode.setup import env_id_for, template_files

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "examples" / "tasks").glob("*.json"))


def _write(spec: TaskSpec, dest: Path) -> dict[str, bytes]:
    files = template_files(spec)
    for rel, data in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    return files


@contextmanager
def _importable(path: Path, module: str) -> Iterator[None]:
    """``path`` on sys.path with ``module`` freshly imported from it, and both forgotten afterwards."""

    def forget() -> None:
        for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
            del sys.modules[name]

    forget()
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))
        forget()


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.stem)
def test_skeleton_renders_with_the_task_names(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    env_id = env_id_for(spec)
    module = env_id.replace("-", "_")
    files = template_files(spec)
    env_files = {p: d.decode() for p, d in files.items() if p.startswith("env/")}
    assert sorted(env_files) == sorted(["env/pyproject.toml", f"env/{module}/__init__.py", f"env/{module}/tools.py"])
    for path, text in env_files.items():
        assert "$" not in text, f"{path}: an unrendered placeholder"
        if path.endswith(".py"):
            compile(text, path, "exec")
    project = tomllib.loads(env_files["env/pyproject.toml"])
    assert project["project"]["name"] == env_id
    assert project["project"]["dependencies"] == ["verifiers"]
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [module]
    assert f'id = "{env_id}"' in files["job.toml"].decode()


async def _tool_names(toolsets: list[Any]) -> list[str]:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("skeleton")
    for toolset in toolsets:
        toolset.register(server)
    return [tool.name for tool in await server.list_tools()]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("family", ["calc_chain", "ledger", "triage"])
def test_skeleton_imports_with_verifiers_and_is_incomplete(tmp_path: Path, family: str) -> None:
    import verifiers.v1 as vf

    spec = load_spec(ROOT / "examples" / "tasks" / f"{family}_v1.json")
    _write(spec, tmp_path)
    env_id = env_id_for(spec)
    with _importable(tmp_path / "env", env_id.replace("-", "_")):
        config = vf.taskset_config_type(env_id).model_validate({"id": env_id, "num_tasks": 10})
        taskset = vf.load_taskset(config)
        assert type(taskset).__name__ == "TrainTaskset"
        assert list(taskset) == []  # the generator is the agent's to write
        assert asyncio.run(_tool_names(type(taskset).toolsets(config))) == ["example_tool"]
        task_cls = type(taskset).task_type()
        task = task_cls(task_cls.data_type()(prompt="q", answer="42"))
        reward = asyncio.run(task.correct(SimpleNamespace(last_reply="<answer>42</answer>")))
        assert reward == 0.0  # the reward is the agent's to write


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_probe_says_what_an_untouched_skeleton_lacks(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "examples" / "tasks" / "calc_chain_v1.json")
    _write(spec, tmp_path)
    report = await ProbeValidator().validate(tmp_path, spec, 1)
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert sorted(failed) == ["prime_rl_config", "rubric", "tasks", "tools"], failed
    assert "load() returned no tasks" in failed["tasks"]
    assert "missing tool(s) ['add', 'sub', 'mul', 'div']" in failed["tools"]
    assert "'example_tool'" in failed["tools"]
