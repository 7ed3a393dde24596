"""The local sampler: the project's OpenAI-compatible server (adapters/openai_server) answering with the
published sampler weights, and the agent policy that samples from it.

:class:`SamplerPool` is the server's policy. A request names the weights it wants in its ``model`` field: a
sampler path the learner published (``local:checkpoints/000003.sampler``) or ``base`` (sampler version 0).
The pool merges that adapter into a fresh copy of the base model on first use and serves it with a
:class:`~adapters.tiny.policy.TinyPolicy` (batched, seeded sampling; the tiny model's chat template and hermes
tool-call parsing); it keeps the ``keep`` most recently used versions loaded (the run config's staleness bound
+ 2: a version older than that trains nothing, and one asked for again is merged again from disk).

Besides the OpenAI routes, ``GET /v1/local/samples?session_id=S`` returns (and forgets) what the requests of
session ``S`` (the ``X-Session-ID`` header) sampled, by turn: prompt ids, sampled ids and their log-probs.

:class:`LocalPolicy` is the ``AgentPolicy`` of one episode: bound to one sampler (its version and path), it
asks the server for each turn through :class:`~adapters.agents.openai.OpenAIPolicy` (the same client as any
OpenAI-compatible agent) under its own session id, then reads the turn's tokens and log-probs back, and puts
them in ``AgentReply.training`` as the Tinker policy does.

Reproducibility: a policy given the run's ``seed`` and its ``episode_id`` sends each turn's sampling seed,
:func:`turn_seed` of (run seed, episode id, turn), so what an episode samples does not depend on which
requests came before it (concurrency reorders them) nor on a crash and resume in between. A pool built with
``max_batch = 1`` answers one request per forward pass: a batch pads its rows, which moves the log-probs by
~1e-6 and so the learner's datums; one at a time they are bit-identical from run to run.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import uuid
from collections import OrderedDict
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import msgspec
import structlog
from aiohttp import web

from adapters.agents.openai import OpenAIConfig, OpenAIPolicy
from adapters.openai_server import ChatRequest, PolicyError, Reply, ServerState, build_app, serve_app
from adapters.tiny.model import Checkpoint
from adapters.tiny.policy import RequestSample, TinyPolicy
from handlers.ports.policy import AgentReply

from .checkpoint import CheckpointError, read_checkpoint
from .lora import load_base, merged_model

__all__ = ["BASE", "LocalPolicy", "LocalSamplerServer", "SamplerPool", "turn_seed"]

log = structlog.get_logger(__name__)

BASE = "base"  # the model name of sampler version 0


def turn_seed(run_seed: int, episode_id: str, turn: int) -> int:
    """The sampling seed of ``turn`` of ``episode_id`` in a run seeded ``run_seed`` (a stable 62-bit hash)."""
    digest = hashlib.blake2b(f"{run_seed}:{episode_id}:{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


class SamplerPool:
    """The server's policy: one :class:`TinyPolicy` per sampler path, merged on first use (see module doc)."""

    def __init__(
        self, root: Path, *, base_model: str, rank: int, keep: int = 4, seed: int = 0, max_batch: int = 64
    ) -> None:
        self.root = Path(root)
        self.max_batch = max_batch  # requests per forward pass (1: bit-identical log-probs, see module doc)
        self.base_model = base_model
        self.rank = rank
        self.keep = max(1, keep)
        self.seed = seed
        _model, self.tokenizer = load_base(base_model)
        self._loaded: OrderedDict[str, TinyPolicy] = OrderedDict()
        self._loading = asyncio.Lock()
        self.samples: dict[tuple[str | None, int], RequestSample] = {}
        self.loads = 0  # merges done (tests, observability)

    def _build(self, name: str) -> TinyPolicy:
        state = None
        if name != BASE:
            try:
                state, meta, _ = read_checkpoint(self.root, name, with_state=False)
            except CheckpointError as exc:
                raise PolicyError(str(exc)) from None
            if meta.get("base_model") != self.base_model or meta.get("rank") != self.rank:
                raise PolicyError(f"sampler {name!r} was trained on another base model or rank")
        model = merged_model(self.base_model, state, self.rank)
        # Each version gets its own seed stream: what one version samples does not shift another's.
        seed = self.seed * 1_000_003 + self.loads
        # Deepest first: an episode one turn from submitting its job submits it before the others' first turns
        # are sampled, so its inner job starts while they are (a step's pods used to wait for every first turn).
        ckpt = Checkpoint(name, model, self.tokenizer)
        return TinyPolicy(ckpt, seed=seed, window_ms=2.0, max_batch=self.max_batch, deepest_first=True)

    async def policy(self, name: str) -> TinyPolicy:
        async with self._loading:
            if name in self._loaded:
                self._loaded.move_to_end(name)
                return self._loaded[name]
            policy = await asyncio.to_thread(self._build, name)
            self.loads += 1
            self._loaded[name] = policy
            while len(self._loaded) > self.keep:
                _old, evicted = self._loaded.popitem(last=False)
                await evicted.aclose()
            log.info("local_sampler.loaded", sampler=name, loaded=len(self._loaded))
            return policy

    async def respond(self, request: ChatRequest) -> Reply:
        policy = await self.policy(request.model or BASE)
        reply = await policy.respond(request)
        turn = sum(m.role == "assistant" for m in request.messages)
        sample = policy.samples.pop((request.session_id, turn), None)
        if sample is not None:
            self.samples[(request.session_id, turn)] = sample
        return reply

    def session_samples(self, session_id: str, *, pop: bool = True) -> list[RequestSample]:
        keys = sorted((k for k in self.samples if k[0] == session_id), key=lambda k: k[1])
        out = [self.samples[k] for k in keys]
        if pop:
            for k in keys:
                del self.samples[k]
        return out

    async def aclose(self) -> None:
        for policy in self._loaded.values():
            await policy.aclose()
        self._loaded.clear()


_POOL: web.AppKey[SamplerPool] = web.AppKey("local_sampler_pool", SamplerPool)


async def _samples(request: web.Request) -> web.Response:
    session = request.query.get("session_id")
    if not session:
        return web.json_response({"error": {"message": "query parameter `session_id` is required"}}, status=400)
    rows = request.app[_POOL].session_samples(session, pop=True)
    body = msgspec.json.encode({"session_id": session, "samples": rows})
    return web.Response(body=body, content_type="application/json")


class LocalSamplerServer:
    """``async with LocalSamplerServer(pool) as server:`` serves ``server.base_url`` on 127.0.0.1."""

    def __init__(self, pool: SamplerPool, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.pool = pool
        self.host = host
        self._requested_port = port
        self.state = ServerState(pool, BASE)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._starting = asyncio.Lock()  # episodes start it on first use, several at once

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("the sampler server is not running")
        return f"http://{self.host}:{self._port}/v1"

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        """Start serving (once: a second call, or a concurrent one, finds it running)."""
        async with self._starting:
            if self._runner is None:
                await self._start()

    async def _start(self) -> None:
        app = build_app(self.state)
        app[_POOL] = self.pool
        app.router.add_get("/v1/local/samples", _samples)
        self._runner, self._port = await serve_app(app, self.host, self._requested_port)
        log.info("local_sampler.started", url=self.base_url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._port = None
        await self.pool.aclose()

    async def __aenter__(self) -> LocalSamplerServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class _Session(httpx.AsyncBaseTransport):
    """Adds the episode's ``X-Session-ID`` to every request over a shared transport (which it never closes)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, session_id: str) -> None:
        self._inner = inner
        self._session = session_id

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["X-Session-ID"] = self._session
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class _SampleRow(msgspec.Struct):
    turn: int
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


class _Samples(msgspec.Struct):
    samples: list[_SampleRow]


_sessions = itertools.count()


class LocalPolicy:
    """The agent policy of one episode on the local sampler (see the module doc)."""

    def __init__(
        self,
        *,
        base_url: str,
        transport: httpx.AsyncBaseTransport,
        sampler_path: str,
        sampler_version: int,
        max_tokens: int,
        temperature: float,
        label: str = "local",
        episode_id: str = "",
        seed: int | None = None,
    ) -> None:
        """``seed`` (with ``episode_id``): each turn samples with :func:`turn_seed`; None: the server draws one."""
        self.sampler_path = sampler_path
        self.sampler_version = sampler_version
        self.episode_id = episode_id
        self.seed = seed
        self.session_id = f"{label}-{next(_sessions)}-{uuid.uuid4().hex[:8]}"
        self._transport = _Session(transport, self.session_id)
        self._base_url = base_url
        model = sampler_path or BASE
        self._chat = OpenAIPolicy(
            OpenAIConfig(model=model, base_url=base_url, temperature=temperature, max_tokens=max_tokens),
            transport=self._transport,
            environ={},
        )
        self.model = "local"  # unpriced, like the offline policy: sampling on this machine costs nothing
        self.name = f"local:{model}"

    def skip_to(self, turn: int) -> None:
        """Continue an interrupted episode: the server keys turns by the conversation, nothing to move."""

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply:
        turn = sum(m.get("role") == "assistant" for m in messages)
        seed = None if self.seed is None else turn_seed(self.seed, self.episode_id, turn)
        reply = await self._chat.next_turn(messages, tools, seed=seed)
        async with httpx.AsyncClient(transport=self._transport, base_url=self._base_url.rstrip("/")) as client:
            response = await client.get("/local/samples", params={"session_id": self.session_id})
        if response.status_code != 200:
            raise PolicyError(f"local sampler: samples of {self.session_id}: HTTP {response.status_code}")
        rows = [r for r in msgspec.json.decode(response.content, type=_Samples).samples if r.turn == turn]
        if not rows:
            raise PolicyError(f"local sampler: no sample recorded for {self.session_id} turn {turn}")
        row = rows[-1]
        training = {
            "prompt_tokens": row.prompt_ids,
            "sampled_tokens": row.token_ids,
            "sampled_logprobs": row.logprobs,
            "sampler_version": self.sampler_version,
            "stop_reason": row.finish_reason,
        }
        return msgspec.structs.replace(reply, model=self.model, training=training)
