"""The OpenAI-compatible server for a tiny checkpoint, on 127.0.0.1.

It is the openai_server app (same routes, request parsing and SSE chunks) with :class:`TinyPolicy`
answering, plus two routes for trainers:

- ``GET /v1/tiny/samples?session_id=S[&pop=1]``: the sampled token ids and log-probs of every request
  of rollout ``S`` (the ``X-Session-ID`` header), by turn;
- ``GET /v1/tiny/info``: the served model.

In process: ``async with TinyServer(ckpt) as server: ... server.base_url``. As a subprocess (prints its
URL on the first stdout line): ``python -m adapters.tiny --model tiny-0.6b --port 0``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from types import TracebackType

import msgspec
import structlog
import torch
from aiohttp import web

from adapters.openai_server import ServerState, build_app, serve_app

from .model import Checkpoint, load_checkpoint
from .policy import TinyPolicy

__all__ = ["TinyServer", "main"]

log = structlog.get_logger(__name__)

_POLICY: web.AppKey[TinyPolicy] = web.AppKey("tiny_policy", TinyPolicy)


async def _samples(request: web.Request) -> web.Response:
    policy = request.app[_POLICY]
    session = request.query.get("session_id")
    if session is None:
        return web.json_response({"error": {"message": "query parameter `session_id` is required"}}, status=400)
    pop = request.query.get("pop", "0") in ("1", "true", "yes")
    rows = policy.session_samples(session, pop=pop)
    return web.Response(
        body=msgspec.json.encode({"session_id": session, "samples": rows}), content_type="application/json"
    )


async def _info(request: web.Request) -> web.Response:
    return web.json_response(request.app[_POLICY].info())


class TinyServer:
    """``async with TinyServer(ckpt) as server:`` serves ``server.base_url`` until the block ends."""

    def __init__(
        self,
        ckpt_or_policy: Checkpoint | TinyPolicy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
    ) -> None:
        self.policy = ckpt_or_policy if isinstance(ckpt_or_policy, TinyPolicy) else TinyPolicy(ckpt_or_policy)
        self.host = host
        self._requested_port = port
        self.state = ServerState(self.policy, model_name or self.policy.ckpt.name)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not running")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def build_app(self) -> web.Application:
        app = build_app(self.state)
        app[_POLICY] = self.policy
        app.router.add_get("/v1/tiny/samples", _samples)
        app.router.add_get("/v1/tiny/info", _info)
        return app

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the server is already running")
        self._runner, self._port = await serve_app(self.build_app(), self.host, self._requested_port)
        log.info("tiny.server.started", url=self.base_url, model=self.policy.ckpt.name)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._port = None
        await self.policy.aclose()

    async def __aenter__(self) -> TinyServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def _serve(args: argparse.Namespace) -> None:
    ckpt = load_checkpoint(args.model if args.path is None else args.path)
    policy = TinyPolicy(ckpt, window_ms=args.window_ms, max_batch=args.max_batch, seed=args.seed)
    async with TinyServer(policy, host=args.host, port=args.port, model_name=args.served_name) as server:
        sys.stdout.write(server.base_url + "\n")
        sys.stdout.flush()
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-0.6b", help="tiny model name or Qwen alias")
    parser.add_argument("--path", type=Path, default=None, help="a checkpoint directory (overrides --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--served-name", default=None)
    parser.add_argument("--window-ms", type=float, default=5.0)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
