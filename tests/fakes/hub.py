"""A local stub of the Hugging Face Hub's HTTP API, enough for one ``create_repo`` + ``create_commit``.

It answers the routes the client calls (``POST /api/repos/create``, ``POST /api/validate-yaml``,
``POST /api/models/{repo}/preupload/{rev}``, ``POST /api/models/{repo}/commit/{rev}`` with an NDJSON body) on
127.0.0.1, checks the bearer token, and keeps what was committed so a test can read it back.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

__all__ = ["HubStub", "hub_stub"]


class HubStub:
    def __init__(self, token: str) -> None:
        self.token = token
        self.url = ""
        self.repos: dict[str, dict[str, Any]] = {}  # repo id -> {"private": bool, "files": {path: bytes}}
        self.routes: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.routes.append(f"{request.method} {request.path}")
        if request.path == "/api/agent-harnesses":  # the client's own registry look-up, sent without a token
            return web.json_response({})
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"error": "Invalid credentials in Authorization header"}, status=401)
        parts = request.path.strip("/").split("/")
        if request.path == "/api/validate-yaml":  # the model card's front matter
            return web.json_response({"errors": [], "warnings": []})
        if request.path == "/api/repos/create":
            body = await request.json()
            repo_id = f"{body.get('organization') or 'ada'}/{body['name']}"
            created = repo_id not in self.repos
            private = bool(body.get("private")) or body.get("visibility") == "private"
            self.repos.setdefault(repo_id, {"private": private, "files": {}})
            status = 200 if created else 409
            return web.json_response({"url": f"{self.url}/{repo_id}", "name": repo_id, "error": ""}, status=status)
        if len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4] == "preupload":
            body = await request.json()
            files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in body["files"]]
            return web.json_response({"files": files, "commitOid": "0" * 40})
        if len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4] == "commit":
            repo_id = f"{parts[2]}/{parts[3]}"
            if repo_id not in self.repos:
                return web.json_response({"error": "Repository not found"}, status=404)
            for line in (await request.read()).decode().splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    value = item["value"]
                    self.repos[repo_id]["files"][value["path"]] = base64.b64decode(value["content"])
            oid = "1" * 40
            return web.json_response({"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid})
        return web.json_response({"error": f"no route {request.path}"}, status=404)


@contextmanager
def hub_stub(token: str) -> Iterator[HubStub]:
    """The stub serving on a free port of 127.0.0.1 in a thread of its own, for the duration of the block."""
    stub = HubStub(token)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner: list[web.AppRunner] = []

    async def start() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", stub.handle)
        r = web.AppRunner(app)
        await r.setup()
        site = web.TCPSite(r, "127.0.0.1", 0)
        await site.start()
        port = r.addresses[0][1]
        stub.url = f"http://127.0.0.1:{port}"
        runner.append(r)
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield stub
    finally:
        asyncio.run_coroutine_threadsafe(runner[0].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
