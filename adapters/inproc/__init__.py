"""In-process rollouts of a verifiers v1 environment: its tasks, tools and rewards, no per-rollout processes.

A ``vf-eval`` rollout costs ~5-13 CPU-s of process start-up (a harness program, an MCP tool server);
a CPU training loop needs hundreds of rollouts a minute. This package runs the same rollout in the
calling process, with verifiers 0.4.0's own machinery wherever it does not need a process: the loader
(``vf.load_taskset``), the Toolsets' own MCP tool registration (served from an in-memory MCP server),
the trace's message graph, limits and ``@vf.stop`` / ``@vf.intercept`` hooks (``RolloutSession``), the
SSE stream parser, and ``Task.score`` with the env's ``@vf.reward`` functions. The chat loop is the null
harness's. ``tests/adapters/inproc/test_parity.py`` checks that it gives the same rewards as real
``vf-eval`` for the same env, policy and tasks.

The model side is a policy port, the one the local OpenAI-compatible server uses
(``adapters.openai_server.Policy``: ``async respond(ChatRequest) -> Reply``); ``ChatRequest.session_id``
is the trace id, so a model-backed policy can key its sampled tokens by rollout.

Agent-written env code runs here: use this only inside a pod-agent (or another sandboxed) process, never
in the engine process.

Usage::

    env = load_env("family-reference", path="fixtures/envs/family_reference", config={"num_tasks": 8})
    async with InprocRunner(env, ReferencePolicy(family, tasks), RolloutSettings(max_turns=8)) as runner:
        results = await runner.run(env.tasks(8), group_size=4)
    results[0].reward, results[0].rewards, results[0].trace   # a verifiers Trace
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from ._loader import EnvLoadError, InprocEnv, load_env, module_name
    from ._rollout import RolloutResult, RolloutSettings, rollout
    from ._runner import InprocRunner
    from ._tools import InprocToolset, ToolRouter

# Lazy: importing one piece must not load verifiers (seconds of imports) until a piece that needs it is used.
_WHERE = {
    "EnvLoadError": "_loader",
    "InprocEnv": "_loader",
    "load_env": "_loader",
    "module_name": "_loader",
    "RolloutResult": "_rollout",
    "RolloutSettings": "_rollout",
    "rollout": "_rollout",
    "InprocRunner": "_runner",
    "InprocToolset": "_tools",
    "ToolRouter": "_tools",
}

__getattr__ = lazy_exports(__name__, _WHERE)


__all__ = [
    "EnvLoadError",
    "InprocEnv",
    "InprocRunner",
    "InprocToolset",
    "RolloutResult",
    "RolloutSettings",
    "ToolRouter",
    "load_env",
    "module_name",
    "rollout",
]
