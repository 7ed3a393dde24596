"""The trusted driver that runs INSIDE the validation sandbox and touches the agent's env package.

Run as a script (``python -I -B sandbox_driver.py``) by :mod:`adapters.probe._sandbox`; it must import
nothing from this project (the project is not visible in the sandbox), only the standard library and the
real ``verifiers`` 0.4.0 (plus ``mcp``, which verifiers ships with). The protocol is JSON lines: the
parent writes one request per line on stdin; the driver answers one JSON line per request on a private
copy of the original stdout (fd 1 itself is pointed at stderr first, so whatever the agent's code prints
cannot corrupt the channel).

Requests, in the order the parent sends them:
- ``init``: rlimits and the unprivileged uid to switch to, before any agent code; then verifiers is
  imported once (the expensive part: 5-9 s) and the driver answers ``ready``;
- ``import``: put the env project on ``sys.path`` and resolve its Taskset the way prime-rl does
  (``verifiers.v1.utils.loaders.taskset_class``);
- ``load``: build the taskset config and iterate its tasks; prompts and answers go back to the parent,
  which alone holds the hidden eval fingerprints;
- ``tools``: instantiate the env's toolsets in process and list the tool schemas the model would see;
- ``rubric``: for each requested case, build a trace (task setup, the given tool calls run on the env's
  own tools, then a final reply) and score it with the task's own ``@vf.reward`` functions;
- ``exit``.

The driver only reports facts; the parent decides what passes.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_OUT_FD = -1
_WS = Path("/")
_STATE: dict[str, Any] = {}
_MAX_TEXT = 20_000  # per prompt/answer sent back: enough to compare, bounded in size
_KEEP_TASKS = 64  # task objects kept for the rubric stage
_KEEP_DUMPS = 64  # full task dumps sent back (the parent derives gold tool calls from them)


def _send(obj: dict[str, Any]) -> None:
    data = (json.dumps(obj, default=str, ensure_ascii=False) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(_OUT_FD, view)
        view = view[written:]


def _where(filename: str) -> str | None:
    """A frame's file relative to the workspace copy, or None when it is not the agent's file."""
    try:
        return str(Path(filename).resolve().relative_to(_WS))
    except (ValueError, OSError):
        return None


def _describe(exc: BaseException) -> str:
    """The error and the agent's own frames (``env/x/__init__.py:12 in load``): what to fix, where."""
    frames = [
        f"{rel}:{fs.lineno} in {fs.name}: {(fs.line or '').strip()}"
        for fs in traceback.extract_tb(exc.__traceback__)
        if (rel := _where(fs.filename)) is not None
    ]
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    text = head if not frames else head + "\n  at " + "\n  at ".join(frames[-4:])
    return text[:3000]


def _no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS: no setuid binary can give the child its privileges back (bubblewrap sets it too)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # 38 = PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def apply_limits(init: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _no_new_privs()
    for name, value in init.get("rlimits", {}).items():
        limit = int(value)
        resource.setrlimit(getattr(resource, name), (limit, limit))
    uid, gid = init.get("uid"), init.get("gid", init.get("uid"))
    if uid is not None and gid is not None:
        # Root inside the sandbox until here (bubblewrap keeps capabilities for root); from now on an
        # unprivileged uid with no capabilities, so RLIMIT_NPROC is enforced and files owned by root
        # and not world-readable stay unreadable.
        os.setgroups([])
        os.setresgid(int(gid), int(gid), int(gid))
        os.setresuid(int(uid), int(uid), int(uid))
    os.umask(0o077)


class _Hidden:
    """A meta-path finder that refuses the engine's packages by name.

    Under bubblewrap they are not mounted at all; without it (weaker isolation) the venv's editable
    install would put the project on sys.path. Agent code can undo this at run time: it only stops a
    plain ``import families``, the way the static scan does.
    """

    def __init__(self, names: list[str]) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".", 1)[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _hide_project(names: list[str]) -> None:
    for entry in list(sys.path):
        if any((Path(entry or ".") / name / "__init__.py").is_file() for name in names):
            sys.path.remove(entry)
    sys.meta_path.insert(0, _Hidden(names))


def _module_name(env_id: str) -> str:
    return env_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


def _package_root(env_dir: Path, module: str) -> Path:
    """The directory to put on sys.path: ``env/<module>/``, ``env/src/<module>/`` or ``env/`` itself."""
    for root in (env_dir, env_dir / "src"):
        if (root / module / "__init__.py").is_file() or (root / f"{module}.py").is_file():
            return root
    if (env_dir / "__init__.py").is_file():
        # env/ is itself the package: expose it under the module name through a private link dir.
        link_root = Path(os.environ.get("TMPDIR", "/tmp")) / "ait-envpkg"
        link_root.mkdir(parents=True, exist_ok=True)
        link = link_root / module
        if not link.exists():
            link.symlink_to(env_dir, target_is_directory=True)
        return link_root
    raise ModuleNotFoundError(
        f"no package {module!r} found: expected {env_dir.relative_to(_WS)}/{module}/__init__.py "
        f"(the module name is the [env].id with '-' replaced by '_')"
    )


def _op_import(req: dict[str, Any]) -> dict[str, Any]:
    env_id = str(req["env_id"])
    module = _module_name(env_id)
    env_dir = _WS / str(req["env_path"])
    root = _package_root(env_dir, module)
    sys.path.insert(0, str(root))
    importlib.import_module(module)  # the agent's code runs here first: its errors point at its own lines
    loaders = importlib.import_module("verifiers.v1.utils.loaders")
    cls = loaders.taskset_class(env_id)
    mod = sys.modules[cls.__module__]
    origin = getattr(mod, "__file__", None) or ""
    if _where(origin) is None and not str(Path(origin).resolve()).startswith(str(root.resolve())):
        raise ImportError(
            f"[env].id {env_id!r} resolved to {cls.__module__} outside your env package (a taskset bundled "
            "with verifiers has this name); choose another id"
        )
    _STATE["cls"] = cls
    _STATE["loaders"] = loaders
    return {
        "module": module,
        "taskset": cls.__name__,
        "taskset_module": cls.__module__,
        "file": _where(origin) or origin,
        "task_type": cls.task_type().__name__,
    }


def _field_types(data_cls: type) -> dict[str, str]:
    """The fields the env's TaskData adds to verifiers' own (name -> annotation)."""
    base = importlib.import_module("verifiers.v1").TaskData
    fields = getattr(data_cls, "model_fields", {})
    own = {name: info for name, info in fields.items() if name not in base.model_fields}
    return {name: getattr(info.annotation, "__name__", None) or str(info.annotation) for name, info in own.items()}


def _op_load(req: dict[str, Any]) -> dict[str, Any]:
    cls = _STATE["cls"]
    loaders = _STATE["loaders"]
    env_id = str(req["env_id"])
    raw: dict[str, Any] = {"id": env_id}
    if int(req.get("num_tasks", 0)) > 0:
        raw["num_tasks"] = int(req["num_tasks"])
    config = loaders.taskset_config_type(env_id).model_validate(raw)
    _STATE["config"] = config  # the tools stage needs it even when loading the tasks fails
    _STATE["tasks"] = []
    taskset = cls(config)
    max_tasks = int(req["max_tasks"])
    items: list[dict[str, Any]] = []
    dumps: list[dict[str, Any]] = []
    kept: list[Any] = []
    data_types: set[str] = set()
    fields: dict[str, str] = {}
    truncated = False
    for task in taskset.take(max_tasks + 1):
        if len(items) >= max_tasks:
            truncated = True
            break
        data = task.data
        data_types.add(type(data).__name__)
        if not fields:
            fields = _field_types(type(data))
        answer = getattr(data, "answer", None)
        items.append(
            {
                "prompt": str(data.prompt_text)[:_MAX_TEXT],
                "answer": None if answer is None else str(answer)[:_MAX_TEXT],
            }
        )
        if len(kept) < _KEEP_TASKS:
            kept.append(task)
        if len(dumps) < _KEEP_DUMPS:
            dumps.append(data.model_dump(mode="json"))
    _STATE["tasks"] = kept
    return {
        "count": len(items),
        "truncated": truncated,
        "infinite": bool(taskset.INFINITE),
        "data_types": sorted(data_types),
        "fields": fields,
        "items": items,
        "dumps": dumps,
    }


async def _op_tools(req: dict[str, Any]) -> dict[str, Any]:
    from mcp.server.mcpserver import MCPServer

    vf = importlib.import_module("verifiers.v1")
    cls = _STATE["cls"]
    tasks = _STATE.get("tasks") or []
    config = _STATE.get("config")
    if config is None:
        raise RuntimeError("the taskset config could not be built (see the tasks check)")
    servers: list[tuple[str, Any]] = [("taskset", ts) for ts in cls.toolsets(config)]
    if tasks:
        servers += [("task", ts) for ts in type(tasks[0]).toolsets(tasks[0].config)]
    schemas: list[dict[str, Any]] = []
    dispatch: dict[str, tuple[Any, Any, str]] = {}
    scoped: list[Any] = []
    for scope, toolset in servers:
        if not isinstance(toolset, vf.Toolset):
            raise TypeError(f"{scope} toolsets() returned {type(toolset).__name__}, not a vf.Toolset")
        server = MCPServer(toolset.server_name or type(toolset).__name__)
        await toolset.setup()
        toolset.register(server)
        _route_state(toolset)
        if scope == "task":
            scoped.append(toolset)
        for tool in await server.list_tools():
            full = f"{toolset.server_name}_{tool.name}" if toolset.server_name else tool.name
            schemas.append(
                {"name": full, "description": tool.description or "", "parameters": tool.input_schema, "scope": scope}
            )
            dispatch[full] = (toolset, server, tool.name)
    _STATE["dispatch"] = dispatch
    _STATE["task_toolsets"] = scoped
    return {"tools": schemas}


def _route_state(toolset: Any) -> None:
    """Make the toolset read and write the current trace's state, as verifiers' state channel does.

    Served, a tool pulls the rollout's state as JSON and pushes it back as JSON after the call; the round
    trip is kept here so a state that would not survive the wire fails here too.
    """
    from pydantic import TypeAdapter

    async def pull() -> Any:
        trace = _STATE.get("trace")
        if trace is None:
            return toolset._state_cls()
        return toolset._state_adapter.validate_json(TypeAdapter(type(trace.state)).dump_json(trace.state))

    async def push(before: bytes) -> None:
        trace = _STATE.get("trace")
        after = toolset._state_adapter.dump_json(toolset.state)
        if trace is not None and after != before:
            trace.state = TypeAdapter(type(trace.state)).validate_json(after)

    toolset._pull_state = pull
    toolset._push_state = push


def _result_text(result: Any) -> tuple[str, bool]:
    blocks = getattr(result, "content", None) or []
    text = "\n".join(str(getattr(b, "text", b)) for b in blocks)
    return text, bool(getattr(result, "is_error", False))


async def _rollout(task: Any, calls: list[dict[str, Any]], reply: str) -> dict[str, Any]:
    """One offline rollout: setup, the given tool calls on the env's own tools, the reply, then scoring."""
    vf = importlib.import_module("verifiers.v1")
    from verifiers.v1.graph import MessageNode  # type: ignore[import-untyped]
    from verifiers.v1.state import state_cls  # type: ignore[import-untyped]
    from verifiers.v1.trace import Trace, TraceTask  # type: ignore[import-untyped]
    from verifiers.v1.types import (  # type: ignore[import-untyped]
        AssistantMessage,
        SystemMessage,
        ToolCall,
        ToolMessage,
        UserMessage,
    )

    trace = Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="probe", trainable=False),
    )
    _STATE["trace"] = trace
    out: dict[str, Any] = {"reward": None, "rewards": {}, "errors": [], "tool_results": []}
    dispatch: dict[str, tuple[Any, Any, str]] = _STATE.get("dispatch", {})
    messages: list[tuple[Any, bool]] = []
    if task.data.system_prompt:
        messages.append((SystemMessage(content=str(task.data.system_prompt)), False))
    messages.append((UserMessage(content=task.data.prompt_text), False))
    try:
        await task.setup(trace, None)
        for toolset in _STATE.get("task_toolsets", []):
            await toolset.setup_task(task.data)
        for n, call in enumerate(calls):
            name, args = str(call["name"]), dict(call["arguments"])
            call_id = f"call_{n}"
            messages.append(
                (
                    AssistantMessage(
                        content="", tool_calls=[ToolCall(id=call_id, name=name, arguments=json.dumps(args))]
                    ),
                    True,
                )
            )
            if name not in dispatch:
                text, is_error = f"unknown tool {name!r}", True
            else:
                _toolset, server, raw = dispatch[name]
                try:
                    text, is_error = _result_text(await server.call_tool(raw, args))
                except Exception as exc:  # a tool's own error is what the model would see
                    text, is_error = f"{type(exc).__name__}: {exc}", True
            out["tool_results"].append({"name": name, "result": text[:500], "error": is_error})
            messages.append((ToolMessage(tool_call_id=call_id, content=text, name=name), False))
        messages.append((AssistantMessage(content=reply), True))
        trace.nodes = [
            MessageNode(parent=i - 1 if i else None, message=m, sampled=s) for i, (m, s) in enumerate(messages)
        ]
        trace.is_completed, trace.ok, trace.stop_condition = True, True, "agent_completed"
        await task.finalize(trace, None)
        await task.score(trace, None)
    except Exception as exc:
        out["errors"].append(_describe(exc))
        return out
    rewards = {name: (None if r is None else float(r.score)) for name, r in trace.rewards.items()}
    out["rewards"] = rewards
    if not rewards:
        out["errors"].append("no reward was recorded (no @vf.reward usable without a sandbox runtime)")
    elif any(v is None for v in rewards.values()):
        out["errors"].append(f"a reward function returned nothing or failed: {rewards}")
    else:
        out["reward"] = float(sum(r.score * r.weight for r in trace.rewards.values() if r is not None))
    return out


async def _op_rubric(req: dict[str, Any]) -> dict[str, Any]:
    tasks = _STATE.get("tasks") or []
    results = []
    for case in req["cases"]:
        task = tasks[int(case["index"])]
        entry: dict[str, Any] = {"index": case["index"]}
        for kind, reply in case["replies"].items():
            entry[kind] = await _rollout(task, list(case.get("calls", [])), str(reply))
        results.append(entry)
    return {"results": results}


def _handle(loop: asyncio.AbstractEventLoop, req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    if op == "import":
        return _op_import(req)
    if op == "load":
        return _op_load(req)
    if op == "tools":
        return loop.run_until_complete(_op_tools(req))
    if op == "rubric":
        return loop.run_until_complete(_op_rubric(req))
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    global _OUT_FD, _WS
    # The protocol channel is a private copy of stdout; fd 1 becomes stderr for everything else.
    _OUT_FD = os.dup(1)
    os.dup2(2, 1)
    init = json.loads(sys.stdin.readline())
    _WS = Path(init["ws"]).resolve()
    try:
        apply_limits(init)
    except OSError as exc:
        _send({"ok": False, "error": f"sandbox setup failed: {exc}"})
        return
    _hide_project(list(init.get("hide", [])))
    started = time.monotonic()
    if init.get("preimport", True):
        # Pay the verifiers import (5-9 CPU-s) before the agent's code runs, so the stage that runs it can
        # have a short timeout of its own.
        importlib.import_module("verifiers.v1")
        importlib.import_module("mcp.server.mcpserver")
    from importlib.metadata import version

    _send(
        {
            "ok": True,
            "verifiers": version("verifiers"),
            "python": sys.version.split()[0],
            "uid": os.getuid(),
            "seconds": time.monotonic() - started,
            "cpu_s": time.process_time(),  # informational (benchmarks): this process's CPU so far
        }
    )
    loop = asyncio.new_event_loop()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "exit":
            break
        started = time.monotonic()
        try:
            reply = {"ok": True, **_handle(loop, req)}
        except BaseException as exc:  # agent code may raise anything, SystemExit included
            reply = {"ok": False, "error": _describe(exc)}
        reply["seconds"] = time.monotonic() - started
        reply["cpu_s"] = time.process_time()
        _send(reply)
    os._exit(0)  # skip interpreter teardown: agent objects' __del__ and atexit hooks do not run


if __name__ == "__main__":
    main()
