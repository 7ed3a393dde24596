"""Parity: the in-process rollout path gives what real ``vf-eval`` gives, for the same env, policy and tasks.

The env is the calc_chain hidden-eval package built by ``families.eval_env`` (one shared tool server,
per-rollout tool state in verifiers' state channel). One policy object answers both paths: by task, it
plays the reference solver, nonsense, or a clumsy caller whose tool calls hit every harness/tool error
path (invalid JSON, a non-object, an unknown tool, an argument of the wrong type) before a wrong answer.
``vf-eval`` runs as a subprocess (null harness, subprocess runtime, ``--no-push``) against the local SSE
server playing that policy, with a turn limit that cuts one reference rollout short; its traces are read
from ``traces.jsonl``. Per task, rewards, metrics, outcome, the conversation (roles, contents, tool
calls) and what the policy was asked must be equal.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.openai_server import ChatRequest, NonsensePolicy, OpenAIServer, ReferencePolicy, Reply, ToolCall
from families import Family, Task, get_family, hidden_tasks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

VF_EVAL = Path(sys.executable).parent / "vf-eval"
N_TASKS = 4
MAX_TURNS = 3


class Clumsy:
    """Every kind of bad tool call once, then a wrong answer (stateless: the step is the tool-result count)."""

    SCRIPT = (
        ToolCall(name="add", arguments='{"a": 1, "b": '),  # invalid JSON
        ToolCall(name="add", arguments="[1, 2]"),  # valid JSON, not an object
    )

    async def respond(self, request: ChatRequest) -> Reply:
        step = sum(1 for m in request.messages if m.role == "tool")
        late = (
            ToolCall(name="no_such_tool", arguments="{}"),
            ToolCall(name="add", arguments='{"a": "seven", "b": 2}'),  # the tool server's validation error
        )
        if step == 0:
            return Reply(tool_calls=list(self.SCRIPT))
        if step == 2:
            return Reply(tool_calls=list(late))
        return Reply(content="<answer>-1</answer>")


class ByTask:
    def __init__(self, family: Family, tasks: list[Task], roles: dict[str, str]) -> None:
        self.reference = ReferencePolicy(family, tasks)
        self.others = {"nonsense": NonsensePolicy(), "clumsy": Clumsy()}
        self.roles = roles
        self.asked: dict[str, list[list[dict[str, Any]]]] = {}

    async def respond(self, request: ChatRequest) -> Reply:
        task = self.reference.identify(request)
        # What the policy saw, minus ids that differ between runs (tool-call ids are per completion).
        self.asked.setdefault(task.id, []).append(
            [
                {"role": m.role, "text": m.text, "calls": [c.function.name for c in m.tool_calls or []]}
                for m in request.messages
            ]
        )
        role = self.roles[task.id]
        policy = self.reference if role.startswith("reference") else self.others[role]
        return await policy.respond(request)


def steps(family: Family, task: Task) -> int:
    return sum(1 for s in family.solve(task) if s.tool is not None)


def view(trace: dict[str, Any]) -> dict[str, Any]:
    """What must agree between the two paths (ids, timings and token estimates excluded)."""

    def message(node: dict[str, Any]) -> tuple[Any, ...]:
        msg = node["message"]
        calls = tuple((c["name"], c["arguments"]) for c in msg.get("tool_calls") or [])
        content = msg.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        return (msg["role"], content, calls, node.get("sampled", False), node.get("parent"))

    return {
        "rewards": trace["rewards"],
        "metrics": trace["metrics"],
        "ok": trace["ok"],
        "stop_condition": trace["stop_condition"],
        "errors": [e["type"] for e in trace["errors"]],
        "nodes": [message(n) for n in trace["nodes"]],
        "tools": sorted(t["name"] for t in trace["tools"]),
        "finish": [c["finish_reason"] for c in trace["calls"]],
    }


async def run_vf_eval(env_id: str, path: str, server: OpenAIServer, home: Path, work: Path) -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "HOME": str(home),
        "UV_CACHE_DIR": str(home / "uv"),
        "TMPDIR": str(work),
        "PYTHONPATH": path,
        "FAKE_API_KEY": "dummy",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = work / "out"
    cmd = [
        str(VF_EVAL),
        env_id,
        "-m",
        "parity-policy",
        "--client.base-url",
        server.base_url,
        "--client.api-key-var",
        "FAKE_API_KEY",
        "--env.agent.harness.id",
        "null",
        "--env.agent.runtime.type",
        "subprocess",
        "--env.agent.max-turns",
        str(MAX_TURNS),
        "-n",
        str(N_TASKS),
        "-r",
        "1",
        "-c",
        str(N_TASKS),
        "--no-push",
        "--no-rich",
        "-o",
        str(out),
    ]
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=work, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    stdout, _ = await proc.communicate()
    traces = sorted(out.glob("*/traces.jsonl"))
    assert traces, f"vf-eval wrote no traces.jsonl:\n{stdout.decode()[-3000:]}"
    episodes = [json.loads(line) for line in traces[0].read_text().splitlines() if line.strip()]
    assert len(episodes) == N_TASKS, stdout.decode()[-3000:]
    return [e["traces"][0] for e in episodes]


@pytest.fixture(scope="session")
def vf_home(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VF_EVAL.exists() or shutil.which("uv") is None:
        pytest.skip("vf-eval (verifiers) or uv is not installed")
    cache = getattr(pytestconfig, "cache", None)
    # Shared with the eval-package e2e tests: the harness's uv environment is downloaded once per checkout.
    return cache.mkdir("vf-eval-home") if cache is not None else tmp_path_factory.mktemp("vf-eval-home")


async def test_inproc_matches_vf_eval(vf_home: Path, tmp_path: Path) -> None:
    from adapters.inproc import InprocRunner, RolloutSettings, load_env
    from families.eval_env import build_eval_package

    family = get_family("calc_chain")
    hidden = list(hidden_tasks(family))
    first = hidden[:N_TASKS]
    short = [t for t in first if steps(family, t) < MAX_TURNS]
    long = [t for t in first if steps(family, t) >= MAX_TURNS]
    assert short and long, "the first hidden tasks must include a short and a long chain"
    roles = {short[0].id: "reference", long[0].id: "reference-cut"}
    rest = [t for t in first if t.id not in roles]
    roles |= {rest[0].id: "nonsense", rest[1].id: "clumsy"}

    pkg = build_eval_package("calc_chain", tmp_path / "pkg")
    served = ByTask(family, hidden, roles)
    async with OpenAIServer(served) as server:
        vf_traces = await run_vf_eval(pkg.env_id, pkg.path, server, vf_home, tmp_path)
        requests = list(server.requests)
    # What the verifiers client sent: streaming with usage, the family's tools by bare name, the system prompt
    # first, one session per rollout (tests/families/test_evalpkg_e2e.py runs the other families' packages).
    assert {r.request.session_id for r in requests} != {None}
    assert len({r.request.session_id for r in requests}) == N_TASKS
    tool_names = sorted(s["function"]["name"] for s in family.tool_schemas())
    for r in requests:
        assert r.request.stream and r.request.include_usage
        assert sorted(r.request.tool_names) == tool_names
        assert r.request.messages[0].role == "system"
    assert len(requests) == sum(map(len, served.asked.values()))

    inproc_policy = ByTask(family, hidden, roles)
    env = load_env(pkg.env_id, path=pkg.path)
    settings = RolloutSettings(model="parity-policy", max_turns=MAX_TURNS)
    async with InprocRunner(env, inproc_policy, settings) as runner:
        results = await runner.run(env.tasks(N_TASKS))

    vf_by_task = {t["task"]["data"]["id"]: view(t) for t in vf_traces}
    in_by_task = {r.trace.task.data.id: view(r.trace.to_record()) for r in results}
    assert set(in_by_task) == set(roles)
    for task_id, role in roles.items():
        assert in_by_task[task_id] == vf_by_task[task_id], role
        assert inproc_policy.asked[task_id] == served.asked[task_id], role
    # The scenarios did what they are for (so equality above is not vacuous).
    outcome = {role: in_by_task[tid] for tid, role in roles.items()}
    assert outcome["reference"]["rewards"]["correct"]["score"] == 1.0
    assert outcome["reference"]["stop_condition"] == "agent_completed"
    assert outcome["reference"]["ok"] and outcome["reference"]["errors"] == []
    assert outcome["reference"]["metrics"]["tool_calls"] == steps(family, short[0])
    assert outcome["reference-cut"]["stop_condition"] == "max_turns"
    assert outcome["reference-cut"]["rewards"]["correct"]["score"] == 0.0
    assert outcome["nonsense"]["rewards"]["correct"]["score"] == 0.0
    clumsy_tools = [n[1] for n in outcome["clumsy"]["nodes"] if n[0] == "tool"]
    assert len(clumsy_tools) == 4 and all("error" in text.lower() for text in clumsy_tools), clumsy_tools
    assert served.reference.mismatches == inproc_policy.reference.mismatches == []
