"""The pod agent's HTTP service (aiohttp): an authenticated front for :class:`~.core.AgentCore`.

Every request, whatever its path, needs ``Authorization: Bearer <token>``; without it the answer is 401
and nothing runs, nothing is read, nothing is listed. The token is compared in constant time and never
logged. Endpoints (docs/gpu-runner-spec.md has the full protocol):

- ``GET  /health``                        agent version, trainer, busy job, the self-check (pending | passed |
  failed, with its items); a submission before the self-check passed is 409 ``not_ready``
- ``POST /jobs/{id}?family=&attempt=&time_budget_s=&sha256=``  body: the bundle tar; idempotent by id
- ``GET  /jobs/{id}``                     status
- ``GET  /jobs/{id}/events?cursor=N&wait=S``  events after N, long-polling up to S seconds
- ``GET  /jobs/{id}/result``              the result document (409 until the job has finished)
- ``POST /jobs/{id}/cancel``              stop it
- ``POST /jobs/{id}/eval?sha256=``        body: the hidden eval package tar; accepted only while the job's
  scoring waits for it (after an ``eval_needed`` event), else 409 ``eval_refused``
- ``GET  /openapi.json``                  the API's description (:mod:`.api`), which every request is parsed by

A malformed request is a 4xx with a one-line reason, never a 500: every parameter goes through :mod:`.api`
(integers are digits, numbers finite and in range, ids and families match their patterns), and a header
that is not ASCII (a non-ASCII bearer token) is refused with 401 before it is compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from handlers.ports.pod_agent import (
    AgentBusy,
    AgentError,
    AgentEvalRefused,
    AgentJobConflict,
    AgentJobUnknown,
    AgentNotFinished,
    AgentNotReady,
    JobSubmission,
)

from .api import BadParameter, openapi, parse_params
from .core import AgentCore, BadSubmission

__all__ = ["MAX_BUNDLE_BYTES", "make_app", "serve"]

log = structlog.get_logger("adapters.pod.agent")

MAX_BUNDLE_BYTES = 256 * 1024 * 1024
_CORE: web.AppKey[AgentCore] = web.AppKey("core", AgentCore)
_TOKEN: web.AppKey[bytes] = web.AppKey("token", bytes)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(obj: object, status: int = 200) -> web.Response:
    return web.Response(body=msgspec.json.encode(obj), status=status, content_type="application/json")


def _error(status: int, code: str, detail: str) -> web.Response:
    # One line: a reason such as tarfile's lists one cause per line.
    return _json({"error": code, "detail": " ".join(detail.split())}, status)


def _given_token(request: web.Request) -> bytes | None:
    """The bearer token of the request as bytes, or None (no header, another scheme, or not ASCII)."""
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    try:
        return given.strip().encode("ascii")  # aiohttp decodes other bytes as surrogates: never a token
    except UnicodeEncodeError:
        return None


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    given = _given_token(request)
    if given is None or not hmac.compare_digest(given, request.app[_TOKEN]):
        resp = _error(401, "unauthorized", "a valid bearer token is required")
        resp.headers["WWW-Authenticate"] = "Bearer"
        return resp
    request.app[_CORE].touch()
    try:
        return await handler(request)
    except web.HTTPException as exc:  # aiohttp's own 4xx (too large, unknown path): one JSON line
        if exc.status >= 500:
            raise
        return _error(exc.status, exc.reason.lower().replace(" ", "_"), exc.reason)
    except BadParameter as exc:
        return _error(400, "bad_request", str(exc))
    except AgentJobUnknown as exc:
        return _error(404, "unknown_job", str(exc))
    except AgentJobConflict as exc:
        return _error(409, "conflict", str(exc))
    except AgentBusy as exc:
        return _error(409, "busy", str(exc))
    except AgentNotFinished as exc:
        return _error(409, "not_finished", str(exc))
    except AgentEvalRefused as exc:
        return _error(409, "eval_refused", str(exc))
    except AgentNotReady as exc:
        return _error(409, "not_ready", str(exc))
    except BadSubmission as exc:
        return _error(400, "bad_request", str(exc))
    except AgentError as exc:
        return _error(500, "agent_error", str(exc))


def _params(request: web.Request, op: str) -> dict[str, Any]:
    """The request's parameters for ``op``, typed and checked against the API's description."""
    return parse_params(op, request.match_info, request.query)


async def _health(request: web.Request) -> web.Response:
    return _json(request.app[_CORE].health())


async def _openapi(request: web.Request) -> web.Response:
    return _json(openapi())


async def _submit(request: web.Request) -> web.Response:
    core = request.app[_CORE]
    p = _params(request, "submit")
    sub = JobSubmission(
        job_id=p["job_id"],
        family=p["family"],
        attempt=p["attempt"],
        time_budget_s=float(p["time_budget_s"]),
        bundle_sha256=p["sha256"],
    )
    bundle = await request.read()
    status = await core.submit(sub, bundle)
    if status.created:
        log.info("job.accepted", job_id=sub.job_id, attempt=sub.attempt, bytes=len(bundle))
    return _json(status, 201 if status.created else 200)


async def _status(request: web.Request) -> web.Response:
    return _json(request.app[_CORE].status(_params(request, "status")["job_id"]))


async def _events(request: web.Request) -> web.Response:
    p = _params(request, "events")
    page = await request.app[_CORE].events(p["job_id"], p["cursor"], float(p["wait"]))
    return _json(page)


async def _result(request: web.Request) -> web.Response:
    return _json(request.app[_CORE].result(_params(request, "result")["job_id"]))


async def _cancel(request: web.Request) -> web.Response:
    return _json(await request.app[_CORE].cancel(_params(request, "cancel")["job_id"]))


async def _eval(request: web.Request) -> web.Response:
    p = _params(request, "eval")
    job_id = p["job_id"]
    package = await request.read()
    status = await request.app[_CORE].provide_eval(job_id, package, p["sha256"])
    log.info("job.eval_received", job_id=job_id, bytes=len(package))
    return _json(status)


def make_app(core: AgentCore, token: str) -> web.Application:
    if len(token) < 16:
        raise ValueError("the pod agent's bearer token must be at least 16 characters")
    app = web.Application(middlewares=[_auth], client_max_size=MAX_BUNDLE_BYTES)
    app[_CORE] = core
    app[_TOKEN] = token.encode()
    app.router.add_get("/health", _health)
    app.router.add_get("/openapi.json", _openapi)
    app.router.add_post("/jobs/{job_id}", _submit)
    app.router.add_get("/jobs/{job_id}", _status)
    app.router.add_get("/jobs/{job_id}/events", _events)
    app.router.add_get("/jobs/{job_id}/result", _result)
    app.router.add_post("/jobs/{job_id}/cancel", _cancel)
    app.router.add_post("/jobs/{job_id}/eval", _eval)
    return app


class _ProtocolLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, but a request that is not valid HTTP (a control byte in a header, a broken
    request line) is one warning line, not a traceback: aiohttp answers it 400 itself, and a hostile client
    must not be able to fill the agent's log with stack traces. Any other exception keeps its traceback."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info")
        if isinstance(exc, HttpProcessingError):
            text = msg % args if isinstance(msg, str) and args else str(msg)
            reason = " ".join(str(exc.message).split())[:200]
            self.logger.warning("%s: malformed HTTP (answered %s): %s", text, exc.code, reason)
            return
        super().log(level, msg, *args, **kwargs)


def _write_url_file(path: Path, url: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"url": url, "pid": os.getpid()}))
    os.replace(tmp, path)


async def serve(
    core: AgentCore,
    token: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    url_file: Path | None = None,
    idle_exit_s: float = 0.0,
    announce: Callable[[str], None] = lambda _url: None,
) -> None:
    """Serve until SIGTERM / SIGINT (or ``idle_exit_s`` without a job or a request); then stop the job."""
    app = make_app(core, token)
    protocol_log = _ProtocolLog(logging.getLogger("aiohttp.server"), {})
    runner = web.AppRunner(app, access_log=None, handle_signals=False, logger=protocol_log)
    await runner.setup()
    sock = socket.create_server((host, port))
    site = web.SockSite(runner, sock)
    await site.start()
    url = f"http://{host}:{sock.getsockname()[1]}"
    announce(url)
    if url_file is not None:
        _write_url_file(url_file, url)
    log.info("agent.listening", url=url, trainer=core.trainer.name)
    core.start_self_check()  # after listening: /health reports it pending meanwhile
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            if idle_exit_s > 0 and not core.busy() and time.monotonic() - core.last_activity > idle_exit_s:
                log.warning("agent.idle_exit", idle_s=idle_exit_s)
                break
    finally:
        await core.close()
        await runner.cleanup()
