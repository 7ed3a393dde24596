"""Running the app: an async context manager bound to 127.0.0.1 on an ephemeral port by default."""

from __future__ import annotations

from types import TracebackType

import structlog
from aiohttp import web

from ._app import RecordedRequest, ServerState, build_app
from ._policies import Policy

__all__ = ["OpenAIServer"]

log = structlog.get_logger(__name__)


async def serve_app(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving ``app`` on ``host:port`` (0: the OS picks); the runner to clean up and the bound port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])  # with port 0, read back what was bound


class OpenAIServer:
    """``async with OpenAIServer(policy) as server:`` serves ``server.base_url`` until the block ends."""

    def __init__(
        self, policy: Policy, *, host: str = "127.0.0.1", port: int = 0, model_name: str = "local-policy"
    ) -> None:
        self.host = host
        self._requested_port = port
        self.state = ServerState(policy, model_name)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """What clients take as ``base_url`` (they append ``/chat/completions``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.state.requests

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the server is already running")
        self._runner, self._port = await serve_app(build_app(self.state), self.host, self._requested_port)
        log.info("openai_server.started", url=self.base_url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._port = None

    async def __aenter__(self) -> OpenAIServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
