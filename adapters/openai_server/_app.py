"""The aiohttp application: routes, request recording, and the policy call.

Routes: ``POST /v1/chat/completions`` (also without the ``/v1`` prefix), ``GET /v1/models`` and
``GET /health``. A malformed request gets a 400 in OpenAI's error envelope naming the bad field, as does one
the model cannot serve (a prompt longer than its context: ``context_length_exceeded``); a policy that cannot
answer gets a 500 with its reason. Every well-formed request is recorded (model,
messages, tools, sampling params, session id) before the policy sees it; headers are not recorded,
so an API key can never end up in a recording.
"""

from __future__ import annotations

import itertools
import time

import msgspec
import structlog
from aiohttp import web

from ._chunks import ChunkStream, completion_body, error_body, estimate_usage, reply_chunks
from ._policies import Policy, PolicyError, RequestRefused
from ._protocol import ChatRequest, RequestError, parse_chat_request

__all__ = ["RecordedRequest", "ServerState", "build_app"]

log = structlog.get_logger(__name__)


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    path: str
    request: ChatRequest


class ServerState:
    """What the app shares across requests: the policy, the id counter and the recording."""

    def __init__(self, policy: Policy, model_name: str) -> None:
        self.policy = policy
        self.model_name = model_name
        self.requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)

    def next_completion_id(self) -> str:
        return f"chatcmpl-{next(self._ids):06d}"


_STATE: web.AppKey[ServerState] = web.AppKey("openai_server_state", ServerState)


def _error(
    status: int, message: str, error_type: str, param: str | None = None, code: str | None = None
) -> web.Response:
    return web.json_response(error_body(message, error_type, param, code), status=status)


async def _chat(request: web.Request) -> web.StreamResponse:
    state = request.app[_STATE]
    body = await request.read()
    try:
        chat = parse_chat_request(body, session_id=request.headers.get("X-Session-ID"))
    except RequestError as exc:
        log.info("openai_server.bad_request", error=str(exc))
        return _error(400, str(exc), "invalid_request_error", exc.param)
    state.requests.append(RecordedRequest(seq=len(state.requests), path=request.path, request=chat))
    try:
        reply = await state.policy.respond(chat)
    except RequestRefused as exc:
        # Not a server fault: a 500 here made clients retry a request that can never succeed.
        log.warning("openai_server.request_refused", error=str(exc), param=exc.param, code=exc.code)
        return _error(400, str(exc), "invalid_request_error", exc.param, exc.code)
    except PolicyError as exc:
        log.warning("openai_server.policy_error", error=str(exc))
        return _error(500, f"policy could not answer: {exc}", "server_error")
    except Exception as exc:  # a policy bug must still reach the client as an error, not a hang
        log.exception("openai_server.policy_crashed")
        return _error(500, f"policy crashed: {type(exc).__name__}: {exc}", "server_error")
    completion_id = state.next_completion_id()
    created = int(time.time())
    usage = reply.usage or estimate_usage(chat, reply)
    if not chat.stream:
        return web.json_response(completion_body(reply, completion_id, chat.model, created, usage))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    stream = ChunkStream(completion_id, chat.model, created)
    for chunk in reply_chunks(reply, stream, usage if chat.include_usage else None):
        await response.write(chunk)
    await response.write_eof()
    return response


async def _models(request: web.Request) -> web.Response:
    name = request.app[_STATE].model_name
    return web.json_response({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "local"}]})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def build_app(state: ServerState) -> web.Application:
    app = web.Application()
    app[_STATE] = state
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    return app
