"""One rollout of a verifiers v1 task in process: the null harness's chat loop, played against a policy port.

What ``vf-eval`` does per rollout, and what this does instead:

- the null harness (a chat program in its own process) keeps an OpenAI message list, sends it with the
  tool schemas, appends the reply, runs each tool call over MCP and loops until a reply has no tool
  calls. Here the same loop runs as a coroutine: the same request bodies (built as the harness builds
  them, with the eval's model and sampling overrides applied as the interception server applies them),
  the same tool-argument error texts, the same tool-result bounding.
- the interception server records each turn into the trace's message graph (``graph.prepare_turn`` /
  ``commit``), checks limits and ``@vf.stop`` hooks before each call and runs ``@vf.intercept`` hooks.
  Here the same verifiers functions do it, on a verifiers ``RolloutSession``.
- the model server answers over SSE. Here the policy (``adapters.openai_server.Policy``: a
  ``ChatRequest`` in, a ``Reply`` out) is called directly; its reply is turned into the SSE chunks the
  server would send and assembled by verifiers' own stream parser, so the trace holds what it would.
- scoring is verifiers' ``Task.score`` on the finished trace (no runtime: see ``_loader``).

Tools come from :mod:`._tools`. Stage timeouts are not enforced here (a tool is plain Python running in
this process); the caller bounds the whole job.
"""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from typing import Any

import msgspec
import structlog
import verifiers.v1 as vf  # type: ignore[import-untyped]
from verifiers.v1 import graph
from verifiers.v1.dialects.base import is_sse_done_event  # type: ignore[import-untyped]
from verifiers.v1.dialects.chat import ChatDialect, message_to_wire  # type: ignore[import-untyped]
from verifiers.v1.errors import (  # type: ignore[import-untyped]
    ProviderError,
    TaskError,
    ToolsetError,
    boundary,
)
from verifiers.v1.harnesses.utils.compaction import bound_tool_message  # type: ignore[import-untyped]
from verifiers.v1.session import RolloutLimits, RolloutSession, hook_boundary  # type: ignore[import-untyped]
from verifiers.v1.state import state_cls  # type: ignore[import-untyped]
from verifiers.v1.utils.decorators import discover_decorated, invoke  # type: ignore[import-untyped]

from adapters.openai_server import ChatRequest, ChunkStream, Policy, Reply, estimate_usage, parse_chat_request
from adapters.openai_server import reply_chunks as sse_chunks

from ._loader import InprocEnv
from ._tools import InprocToolset, ToolRouter

__all__ = ["RolloutResult", "RolloutSettings", "rollout"]

log = structlog.get_logger(__name__)

_DIALECT = ChatDialect()


class RolloutSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What ``vf-eval`` takes as ``-m``, ``--sampling.*`` and ``--env.agent.max-turns``."""

    model: str = "policy"
    sampling: dict[str, Any] = {}  # temperature, top_p, max_tokens, ...: overlaid on every request
    max_turns: int | None = None


class RolloutResult(msgspec.Struct, frozen=True, kw_only=True):
    """One finished rollout: its rewards and outcome, and the verifiers ``Trace`` itself."""

    task_key: str
    task_idx: int | None
    session_id: str  # the trace id; the policy saw it as ChatRequest.session_id (X-Session-ID when served)
    reward: float  # sum of score x weight over the recorded rewards (verifiers' Trace.reward)
    rewards: dict[str, float | None]  # name -> score (None: scoring did not run)
    metrics: dict[str, float | None]
    ok: bool
    stop_condition: str | None
    num_turns: int
    errors: list[str]
    trace: Any


def _result(trace: Any) -> RolloutResult:
    return RolloutResult(
        task_key=str(trace.task.key),
        task_idx=trace.task.data.idx,
        session_id=str(trace.id),
        reward=float(trace.reward),
        rewards={k: (None if r is None else float(r.score)) for k, r in trace.rewards.items()},
        metrics={k: (None if v is None else float(v)) for k, v in trace.metrics.items()},
        ok=bool(trace.ok),
        stop_condition=trace.stop_condition,
        num_turns=int(trace.num_turns),
        errors=[f"{e.type}: {e.message}" for e in trace.errors],
        trace=trace,
    )


def _agent_config(settings: RolloutSettings) -> Any:
    # The agent this emulates: recorded on the trace as vf-eval records its resolved agent.
    return vf.AgentConfig.model_validate(
        {
            "harness": {"id": "null"},
            "runtime": {"type": "subprocess"},
            "model": settings.model,
            "sampling": settings.sampling,
            "max_turns": settings.max_turns,
        }
    )


def _session(task: Any, trace: Any, settings: RolloutSettings) -> Any:
    """The verifiers per-rollout session, with the task's hooks sorted by boundary as a Rollout sorts them."""
    interceptors = [(hook_boundary(fn, allow_trace=False), fn) for fn in discover_decorated(task, "intercept")]
    stops = [(hook_boundary(fn, allow_trace=True), fn) for fn in task.hooks("stop")]
    ctx = vf.ModelContext(
        model=settings.model,
        client=vf.EvalClientConfig(base_url="inproc://policy"),
        sampling=vf.SamplingConfig.model_validate(settings.sampling),
    )
    return RolloutSession(
        ctx=ctx,
        trace=trace,
        trace_stops=[fn for b, fn in stops if b is vf.Trace],
        limits=RolloutLimits(max_turns=settings.max_turns),
        request_interceptors=[fn for b, fn in interceptors if b is vf.Request],
        response_interceptors=[fn for b, fn in interceptors if b is vf.Response],
        request_stops=[fn for b, fn in stops if b is vf.Request],
        response_stops=[fn for b, fn in stops if b is vf.Response],
        gates_tools=True,  # the null harness asks the gate before each call when there are request hooks
    )


def _initial_messages(data: Any) -> list[dict[str, Any]]:
    """The null harness's opening messages: the system prompt (it appends one), then the prompt."""
    messages: list[dict[str, Any]] = []
    if data.system_prompt:
        messages.append({"role": "system", "content": data.system_prompt})
    if isinstance(data.prompt, str):
        if data.prompt:
            messages.append({"role": "user", "content": data.prompt})
    elif data.prompt:
        messages.extend(message_to_wire(m) for m in data.prompt)
    return messages


def _assemble(reply: Reply, request: ChatRequest, completion_id: str) -> Any:
    """The verifiers Response for ``reply``, via the SSE chunks the server would stream for it."""
    stream = ChunkStream(completion_id, request.model, int(time.time()))
    usage = reply.usage or estimate_usage(request, reply)
    parser = _DIALECT.stream_parser()
    for chunk in sse_chunks(reply, stream, usage if request.include_usage else None):
        if parser.on_done is not None and is_sse_done_event(chunk):
            parser.on_done()
        parser.feed(chunk)
    return parser.finish()


async def _run_tool(router: ToolRouter, call: dict[str, Any], trace: Any) -> str | list[dict[str, Any]]:
    """A tool call as the null harness runs it, error texts included."""
    name = call["function"]["name"]
    try:
        arguments = json.loads(call["function"].get("arguments") or "{}")
    except json.JSONDecodeError as e:
        return f"error: invalid JSON in tool arguments ({e}); resend the call with valid JSON"
    if not isinstance(arguments, dict):
        return f"error: tool arguments must be a JSON object, got {type(arguments).__name__}; resend as an object"
    if name not in router:
        return f"error: unknown tool {name!r}"
    return await router.call(name, arguments, trace)


class _Turns:
    """The conversation of one rollout: the harness's side and the interception server's side."""

    def __init__(self, trace: Any, session: Any, policy: Policy, router: ToolRouter, settings: RolloutSettings) -> None:
        self.trace = trace
        self.session = session
        self.policy = policy
        self.router = router
        self.settings = settings
        self.gated = bool(session.request_interceptors or session.request_stops)
        self._calls = 0

    async def run(self, messages: list[dict[str, Any]]) -> None:
        while True:
            reply = await self._model_turn(messages)
            if reply is None:
                return  # stopped or failed; the trace says which
            messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return
            for call in calls:
                tool_message: dict[str, Any] = {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": "",
                    "name": call["function"]["name"],
                }
                if self.gated:
                    decision = await self.session.decide_tool(call["id"], call["function"]["name"], _args(call))
                    if decision["action"] == "stop":
                        return
                    if decision["action"] == "deny":
                        messages.append(bound_tool_message(decision["message"]))
                        continue
                tool_message["content"] = await _run_tool(self.router, call, self.trace)
                messages.append(bound_tool_message(tool_message))

    async def _model_turn(self, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        """One model call through the interception logic; the assistant message dict, or None when it ended."""
        trace, session = self.trace, self.session
        body: dict[str, Any] = {"model": self.settings.model, "messages": [dict(m) for m in messages]}
        if self.router.schemas:
            body["tools"] = self.router.schemas
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        body = _DIALECT.apply_overrides(body, session.ctx.model, session.ctx.sampling)
        if session.stopped or await session.refused() is not None:
            return None
        model_request = original = _DIALECT.parse_request(body)
        async with boundary(TaskError, "model boundary hook"):
            model_request, rewrites, stopped = await session.rewrite_request(model_request)
        trace.request_rewrites.extend(rewrites)
        if stopped is not None:
            turn = graph.prepare_turn(trace, model_request.messages, model_request.tools)
            turn.commit_prompt()
            trace.stop(stopped)
            return None
        if model_request != original:
            _DIALECT.rewrite_request(body, original, model_request)
        turn = graph.prepare_turn(trace, model_request.messages, model_request.tools)
        started = time.time()
        request = parse_chat_request(json.dumps(body).encode(), session_id=str(trace.id))
        node: int | None = None
        response: Any = None
        error: Exception | None = None
        try:
            try:
                reply = await self.policy.respond(request)
            except Exception as exc:  # served, the server answers 500 and the eval client gives up
                raise ProviderError(f"policy could not answer: {type(exc).__name__}: {exc}", status_code=500) from exc
            self._calls += 1
            response = _assemble(reply, request, f"chatcmpl-inproc-{self._calls:06d}")
            stopped = None
            if session.response_interceptors or session.response_stops:
                async with boundary(TaskError, "model boundary hook"):
                    response, response_rewrites, stopped = await session.rewrite_response(response)
                if response_rewrites:
                    raw = response.raw
                    _DIALECT.rewrite_response(raw, response.message.content or "")
                    response = _DIALECT.parse_response(_DIALECT.response_type.model_validate(raw))
                    response.raw = raw
                trace.response_rewrites.extend(response_rewrites)
            if session.stopped:
                return None
            node = turn.commit(response)
            if stopped is None:
                stopped = await session.gate_tool_calls(node)
            if stopped is not None:
                trace.stop(stopped)
                return None
        except Exception as exc:
            error = exc
            raise
        finally:
            if node is None:
                turn.abandon()
            trace.calls.append(_model_call(body, started, node, response, error))
        message: dict[str, Any] = dict(response.raw["choices"][0]["message"])
        return message


def _args(call: dict[str, Any]) -> Any:
    try:
        return json.loads(call["function"].get("arguments") or "{}")
    except json.JSONDecodeError:
        return call["function"].get("arguments")


def _model_call(body: dict[str, Any], started: float, node: int | None, response: Any, error: Exception | None) -> Any:
    err = None
    if error is not None:
        err = vf.Error(type=type(error).__name__, message=str(error), status_code=getattr(error, "status_code", None))
    return vf.ModelCall(
        node=node,
        model=body.get("model"),
        sampling=_DIALECT.parse_sampling(body),
        endpoint=_DIALECT.upstream_path,
        finish_reason=response.finish_reason if response is not None else None,
        usage=response.usage if response is not None else None,
        time=vf.TimeSpan(start=started, end=time.time()),
        error=err,
    )


async def rollout(
    env: InprocEnv,
    task: Any,
    policy: Policy,
    settings: RolloutSettings,
    shared: list[InprocToolset],
) -> RolloutResult:
    """Run ``task`` once against ``policy`` and score it; rollout errors are recorded on the trace, not raised."""
    env.check_task(task)
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=vf.AgentInfo(config=_agent_config(settings)),
    )
    timing = trace.timing
    timing.boot.start = timing.boot.end = timing.setup.start = time.time()
    failed = False
    async with AsyncExitStack() as stack:
        try:
            if task.data.prompt is None:
                raise TaskError("task has no prompt and no user to open the conversation; set task.prompt")
            async with boundary(TaskError, "task setup"):
                await invoke(task.setup, {"trace": trace, "runtime": None})
            async with boundary(ToolsetError, "building tool servers"):
                own = [InprocToolset(t) for t in env.task_toolsets(task)]
                for server in own:
                    stack.push_async_callback(server.close)
                    await server.start(trace.task.data)
            router = ToolRouter([*shared, *own])
            timing.setup.end = timing.agent.start = time.time()
            session = _session(task, trace, settings)
            await _Turns(trace, session, policy, router, settings).run(_initial_messages(task.data))
            if trace.stop_condition is None:
                trace.stop("agent_completed")
        except Exception as exc:  # the rollout boundary: every failure is recorded on the trace
            if not isinstance(exc, vf.RolloutError):
                log.exception("inproc.rollout_unexpected_error", task=trace.task.key)
            trace.record_error(exc)
            failed = True
    now = time.time()
    for span in (timing.setup, timing.agent):
        if span.start and not span.end:
            span.end = now
    if not failed:
        timing.finalize.start = time.time()
        try:
            async with boundary(TaskError, "task finalize"):
                await invoke(task.finalize, {"trace": trace, "runtime": None})
            timing.finalize.end = timing.scoring.start = time.time()
            async with boundary(TaskError, "scoring"):
                await task.score(trace, None)
        except Exception as exc:
            trace.record_error(exc)
            failed = True
        for span in (timing.finalize, timing.scoring):
            if span.start and not span.end:
                span.end = time.time()
    trace.is_completed = True
    trace.ok = not failed
    trace.split_agent_time()
    return _result(trace)
