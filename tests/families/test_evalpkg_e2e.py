"""End to end: generated hidden-eval packages run by the real ``vf-eval`` (verifiers 0.4.0) against the
local OpenAI-compatible server on 127.0.0.1 playing the reference solver (reward 1.0) or nonsense (0).

``vf-eval`` runs as a subprocess with the package on PYTHONPATH (nothing is installed). Results are read
from ``traces.jsonl`` (episode and trace ``ok``/``errors``, rewards, metrics), never from the exit code,
which is 0 even when every rollout fails. The first run downloads the null harness's chat-program
dependencies (~61 MB) into a uv cache kept in pytest's cache dir, so that happens once per checkout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.openai_server import (
    ChatRequest,
    NonsensePolicy,
    OpenAIServer,
    Policy,
    ReferencePolicy,
    Reply,
)
from families import FAMILIES, Family, Task, get_family, hidden_tasks
from families.eval_env import EvalPackage, build_eval_package

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

VF_EVAL = Path(sys.executable).parent / "vf-eval"


def available() -> list[str]:
    out = []
    for name in FAMILIES:
        try:
            get_family(name)
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


@pytest.fixture(scope="session")
def vf_home(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VF_EVAL.exists() or shutil.which("uv") is None:
        pytest.skip("vf-eval (verifiers) or uv is not installed")
    cache = getattr(pytestconfig, "cache", None)
    return cache.mkdir("vf-eval-home") if cache is not None else tmp_path_factory.mktemp("vf-eval-home")


class ByTask:
    """The reference solver on some tasks, nonsense on the others: one server, both behaviours."""

    def __init__(self, family: Family, tasks: list[Task], solve: set[str]) -> None:
        self.reference = ReferencePolicy(family, tasks)
        self.nonsense = NonsensePolicy()
        self.solve = solve

    async def respond(self, request: ChatRequest) -> Reply:
        task = self.reference.identify(request)
        policy: Policy = self.reference if task.id in self.solve else self.nonsense
        return await policy.respond(request)


async def vf_eval(pkg: EvalPackage, server: OpenAIServer, n: int, home: Path, work: Path) -> list[dict[str, Any]]:
    """Run ``vf-eval`` on the first ``n`` tasks; return the episodes of traces.jsonl."""
    env = {
        **os.environ,
        "HOME": str(home),
        "UV_CACHE_DIR": str(home / "uv"),
        "TMPDIR": str(work),  # verifiers leaves vf-port-* files in the temp dir
        "PYTHONPATH": pkg.path,
        "FAKE_API_KEY": "dummy",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # would make every harness process recompile openai/mcp
    out = work / "out"
    cmd = [
        str(VF_EVAL),
        pkg.env_id,
        "-m",
        "reference-policy",
        "--client.base-url",
        server.base_url,
        "--client.api-key-var",
        "FAKE_API_KEY",
        "--env.agent.harness.id",
        "null",
        "--env.agent.runtime.type",
        "subprocess",
        "-n",
        str(n),
        "-r",
        "1",
        "-c",
        str(n),
        "--no-push",
        "--no-rich",
        "-o",
        str(out),
    ]
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=work, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    stdout, _ = await proc.communicate()
    print(f"vf-eval {pkg.env_id} -n {n}: {time.monotonic() - started:.1f}s wall, exit {proc.returncode}")
    episodes = read_episodes(out, stdout.decode())
    assert len(episodes) == n, stdout.decode()[-3000:]
    return episodes


def read_episodes(out: Path, output: str) -> list[dict[str, Any]]:
    traces = sorted(out.glob("*/traces.jsonl"))
    assert traces, f"vf-eval wrote no traces.jsonl; output tail:\n{output[-3000:]}"
    return [json.loads(line) for line in traces[0].read_text().splitlines() if line.strip()]


def outcome(episode: dict[str, Any]) -> tuple[str, float, float]:
    """(task id, reward, tool calls) of a healthy episode; anything unhealthy fails with its errors."""
    (trace,) = episode["traces"]
    assert episode["ok"] and not episode["errors"], episode["errors"]
    assert trace["ok"] and not trace["errors"], trace["errors"]
    assert trace["stop_condition"] == "agent_completed"
    return trace["task"]["data"]["id"], trace["rewards"]["correct"]["score"], trace["metrics"]["tool_calls"]


def tool_steps(family: Family, task: Task) -> int:
    return sum(1 for s in family.solve(task) if s.tool is not None)


# Each vf-eval costs ~20-30 s of process start-up on 2 cores, so CI runs the stateful family (ledger) and the
# held-out one (triage); calc_chain's package runs under the real vf-eval in tests/adapters/inproc/test_parity.py
# (with what the verifiers client sends). AIT_FULL_E2E=1 runs every family here (all six passed when measured;
# see docs/families.md).
_E2E = [n for n in available() if os.environ.get("AIT_FULL_E2E") or n in ("ledger", "triage")]


@pytest.mark.parametrize("name", _E2E)
async def test_every_family_reference_1_nonsense_0(name: str, vf_home: Path, tmp_path: Path) -> None:
    family = get_family(name)
    hidden = list(hidden_tasks(family))
    # ByTask routes on the task identified at the first turn, from the prompt alone.
    assert len({t.prompt for t in hidden[:3]}) == 3, "the first three hidden tasks must have distinct prompts"
    pkg = build_eval_package(name, tmp_path / "pkg")
    policy = ByTask(family, hidden, solve={hidden[0].id, hidden[1].id})
    async with OpenAIServer(policy) as server:
        episodes = await vf_eval(pkg, server, 3, vf_home, tmp_path)
    by_id = {t.id: t for t in hidden}
    results = {task_id: (reward, calls) for task_id, reward, calls in map(outcome, episodes)}
    assert results == {
        hidden[0].id: (1.0, tool_steps(family, by_id[hidden[0].id])),
        hidden[1].id: (1.0, tool_steps(family, by_id[hidden[1].id])),
        hidden[2].id: (0.0, 0.0),
    }
    assert policy.reference.mismatches == []


def read_summary(root: Path) -> dict[str, Any]:
    (summary_file,) = root.glob("**/summary.json")
    summary: dict[str, Any] = json.loads(summary_file.read_text())
    return summary


async def test_vf_validate_gold_and_noop_checks(vf_home: Path, tmp_path: Path) -> None:
    """``vf-validate`` (model-free): the bundled answers pass the gold check, an untouched task fails."""
    pkg = build_eval_package("ledger", tmp_path / "pkg")
    env = {**os.environ, "HOME": str(vf_home), "TMPDIR": str(tmp_path), "PYTHONPATH": pkg.path}
    cmd = [str(VF_EVAL.with_name("vf-validate")), pkg.env_id, "--runtime.type", "subprocess", "--no-rich", "-n", "5"]
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    stdout, _ = await proc.communicate()
    summary = read_summary(tmp_path)
    assert summary["checks"]["gold"]["valid"] == 5, stdout.decode()[-3000:]
    assert summary["checks"]["noop"]["valid"] == 5
    assert summary["valid_rate"] == 1.0
