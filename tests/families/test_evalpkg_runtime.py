"""Generated eval packages loaded in process with the real verifiers 0.4.0 (no rollouts; see *_e2e)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from families import FAMILIES, get_family, hidden_tasks
from families.eval_env import build_eval_package

# find_spec, not importorskip: collection must not import verifiers (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")


def available() -> list[str]:
    out = []
    for name in FAMILIES:
        try:
            get_family(name)
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """Every available family's package, built once and importable for this module's tests."""
    out = tmp_path_factory.mktemp("evalpkgs")
    infos = {name: build_eval_package(name, out) for name in available()}
    sys.path[:0] = [info.path for info in infos.values()]
    try:
        yield {name: importlib.import_module(info.module) for name, info in infos.items()}
    finally:
        for info in infos.values():
            sys.path.remove(info.path)
            for mod in [m for m in sys.modules if m.split(".")[0] == info.module]:
                del sys.modules[mod]


def strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


@pytest.mark.parametrize("name", available())
async def test_served_tool_schemas_match_the_family_schemas(name: str, packages: dict[str, ModuleType]) -> None:
    import verifiers.v1 as vf
    from mcp.server.mcpserver import MCPServer

    toolset_module = importlib.import_module(f"{packages[name].__name__}.toolset")
    toolset = getattr(toolset_module, toolset_module.__all__[0])(vf.SharedToolsetConfig())
    assert toolset.server_name == ""  # TOOL_PREFIX None: the model sees bare names
    server = MCPServer("probe")
    toolset.register(server)
    served = {t.name: t for t in await server.list_tools()}
    expected = {s["function"]["name"]: s["function"] for s in get_family(name).tool_schemas()}
    assert set(served) == set(expected)
    for tool_name, spec in expected.items():
        tool = served[tool_name]
        assert tool.description == spec["description"]
        got = strip_titles(tool.input_schema)
        assert got["properties"] == spec["parameters"]["properties"], tool_name
        assert sorted(got.get("required", [])) == sorted(spec["parameters"]["required"]), tool_name


@pytest.mark.parametrize("name", available())
def test_taskset_loads_through_the_verifiers_loader(name: str, packages: dict[str, ModuleType]) -> None:
    import verifiers.v1 as vf

    module = packages[name]
    env_id = f"ait-eval-{name.replace('_', '-')}"
    taskset = vf.load_taskset(vf.taskset_config_type(env_id).model_validate({"id": env_id}))
    assert [n for n in module.__all__ if isinstance(getattr(module, n), type)] == [type(taskset).__name__]
    tasks = list(taskset)
    hidden = hidden_tasks(get_family(name))
    assert [t.key for t in tasks] == [t.id for t in hidden]
    first = tasks[0].data
    assert (first.prompt, first.answer, first.world) == (hidden[0].prompt, hidden[0].answer, hidden[0].world)
    assert first.system_prompt
    (toolset,) = type(taskset).toolsets(taskset.config)  # one shared server for the whole eval
    assert type(toolset).__module__ == f"{module.__name__}.toolset"
    assert type(taskset).task_type().toolsets(taskset.config.task) == []  # and none per rollout


@pytest.mark.parametrize("name", available())
async def test_setup_puts_the_task_in_state_and_reward_uses_the_family_scorer(
    name: str, packages: dict[str, ModuleType]
) -> None:
    import verifiers.v1 as vf

    env_id = f"ait-eval-{name.replace('_', '-')}"
    assert packages[name].__name__ == env_id.replace("-", "_")
    taskset = vf.load_taskset(vf.taskset_config_type(env_id).model_validate({"id": env_id}))
    task = next(iter(taskset))
    trace = SimpleNamespace(state=None, last_reply=None)
    await task.setup(trace, None)
    assert trace.state.task["id"] == task.data.id and trace.state.calls == []
    family = get_family(name)
    gold = hidden_tasks(family)[0].answer
    trace.last_reply = f"Done.\n<answer>{gold}</answer>"
    assert await task.correct(trace) == 1.0
    trace.last_reply = "a purple giraffe"
    assert await task.correct(trace) == 0.0
    trace.last_reply = None
    assert await task.correct(trace) == 0.0


@pytest.mark.parametrize("name", available())
async def test_gold_check_passes_on_every_bundled_task(name: str, packages: dict[str, ModuleType]) -> None:
    import verifiers.v1 as vf

    env_id = f"ait-eval-{name.replace('_', '-')}"
    taskset = vf.load_taskset(vf.taskset_config_type(env_id).model_validate({"id": env_id}))
    tasks = list(taskset)
    assert len(tasks) == 200
    assert all([await task.validate(None) for task in tasks])
    broken = tasks[0].with_data(answer=tasks[0].data.answer + "9")
    assert await broken.validate(None) is False


class _StatefulTools:
    """A generated toolset whose rollout state is given (verifiers pulls it from the rollout otherwise)."""

    @staticmethod
    def make(packages: dict[str, ModuleType], name: str, state: Any) -> Any:
        import verifiers.v1 as vf

        toolset_module = importlib.import_module(f"{packages[name].__name__}.toolset")
        cls = getattr(toolset_module, toolset_module.__all__[0])
        sub = type("Pinned", (cls,), {"state": property(lambda self: state)})
        return sub(vf.SharedToolsetConfig())


def test_tools_refuse_to_run_without_a_task_in_state(packages: dict[str, ModuleType]) -> None:
    runtime = importlib.import_module(f"{packages['calc_chain'].__name__}._runtime")
    tools = _StatefulTools.make(packages, "calc_chain", runtime.FamilyState())
    with pytest.raises(RuntimeError, match="no task for the calling rollout"):
        tools.add(a=1, b=2)


ledger_ops = st.lists(
    st.tuples(
        st.sampled_from(["get_balance", "deposit", "withdraw", "transfer"]),
        st.integers(0, 5),
        st.integers(0, 5),
        st.integers(-5, 400),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(ops=ledger_ops, task_index=st.integers(0, 199))
def test_replayed_state_equals_one_live_toolbox(
    packages: dict[str, ModuleType], ops: list[Any], task_index: int
) -> None:
    """A stateful family through the shared server gives exactly what one live toolbox gives."""
    family = get_family("ledger")
    task = hidden_tasks(family)[task_index]
    accounts = [*task.world["balances"], "nobody"]
    runtime = importlib.import_module(f"{packages['ledger'].__name__}._runtime")
    state = runtime.FamilyState(
        task=runtime.FamilyTaskData(
            id=task.id,
            prompt=task.prompt,
            family=task.family,
            answer=task.answer,
            world=task.world,
            difficulty=task.difficulty,
        ).task_fields()
    )
    tools = _StatefulTools.make(packages, "ledger", state)
    live = family.tools(task)
    for op, i, j, amount in ops:
        a, b = accounts[i % len(accounts)], accounts[j % len(accounts)]
        if op == "get_balance":
            args: dict[str, Any] = {"account": a}
        elif op == "transfer":
            args = {"source": a, "target": b, "amount": amount}
        else:
            args = {"account": a, "amount": amount}
        assert getattr(tools, op)(**args) == live.call(op, args)
    assert [c.name for c in state.calls] == [op for op, *_ in ops]
