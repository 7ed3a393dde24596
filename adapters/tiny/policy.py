"""The tiny model behind the OpenAI server's policy port, with request batching and kept samples.

:class:`TinyPolicy` answers ``respond(ChatRequest) -> Reply``: it renders the request's messages and
tools with the chat template, samples with the request's ``temperature`` / ``top_p`` /
``max_tokens`` (or ``max_completion_tokens``) / ``seed`` / ``stop``, and parses the text into content
and tool calls. Requests that arrive within ``window_ms`` of each other share one :func:`generate` batch (run in
a worker thread so the event loop keeps accepting requests; later arrivals form the next batch). Waiting
requests are served in arrival order, or with ``deepest_first`` the one furthest into its conversation first
(most assistant turns already in it; arrival order among equals): a conversation close to its end finishes
sooner, and what it ends in (the trainer agent's job submission) can start while the others are still sampled.

Every answered request leaves a :class:`RequestSample` (prompt ids, sampled ids, their log-probs) in
``samples``, keyed by ``(session_id, turn)``: the ``X-Session-ID`` header verifiers sends per rollout and
the number of assistant messages already in the conversation. A retried request replaces its sample.
``model_lock`` is held while the model generates; a trainer that updates the weights in place holds it
too, so a batch never samples from half-updated weights.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Sequence
from typing import Any, Literal

import msgspec
import structlog
import torch

from adapters.openai_server import ChatRequest, PolicyError, Reply, RequestRefused, ToolCall, Usage

from .chat import parse_reply, render_prompt
from .generate import Sample, SamplingParams, generate
from .model import Checkpoint
from .tokenizer import decode_reply, stop_token_ids

__all__ = ["DEFAULT_SERVER_MAX_TOKENS", "RequestSample", "TinyPolicy"]

log = structlog.get_logger(__name__)

DEFAULT_SERVER_MAX_TOKENS = 256


class RequestSample(msgspec.Struct, frozen=True, kw_only=True):
    seq: int  # order in which the policy answered
    session_id: str | None
    turn: int  # assistant messages already in the request's conversation
    prompt_ids: list[int]
    token_ids: list[int]  # sampled, stop token included when finish_reason == "stop"
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]
    text: str
    temperature: float
    seed: int


class _Job:
    def __init__(self, prompt: list[int], params: SamplingParams, future: asyncio.Future[Sample]) -> None:
        self.prompt, self.params, self.future = prompt, params, future


_Queued = tuple[int, int, _Job]  # (priority, arrival number, the request): the lowest pair is served first


class TinyPolicy:
    """A :class:`~adapters.openai_server.Policy` served by a tiny checkpoint."""

    def __init__(
        self,
        ckpt: Checkpoint,
        *,
        window_ms: float = 5.0,
        max_batch: int = 64,
        seed: int = 0,
        default_max_tokens: int = DEFAULT_SERVER_MAX_TOKENS,
        max_context: int | None = None,
        deepest_first: bool = False,
    ) -> None:
        self.ckpt = ckpt
        self.window_s = window_ms / 1000.0
        self.max_batch = max_batch
        self.default_max_tokens = default_max_tokens
        # By default the model's own position limit, as vLLM's max_model_len defaults to it: a smaller cap here
        # refused prompts the model holds (the tiny agent's conversation after one rejected submission is
        # ~2,100-2,300 tokens, so a 2,048 cap turned the harness's second attempt into an error).
        self.max_context = max_context if max_context is not None else int(ckpt.model.config.max_position_embeddings)
        self.model_lock = threading.Lock()
        self.samples: dict[tuple[str | None, int], RequestSample] = {}
        self.batch_sizes: list[int] = []  # one entry per generate call (observability, tests)
        self._seeds = torch.Generator().manual_seed(seed)  # seeds for requests that carry none
        self._seq = itertools.count()
        self._stops = stop_token_ids(ckpt.tokenizer)
        self.deepest_first = deepest_first
        self._arrivals = itertools.count()
        self._queue: asyncio.PriorityQueue[_Queued] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None

    # -- the policy port ---------------------------------------------------------------------------
    async def respond(self, request: ChatRequest) -> Reply:
        messages = [msgspec.to_builtins(m) for m in request.messages]
        tools = [msgspec.to_builtins(t) for t in request.tools]
        try:
            prompt = render_prompt(self.ckpt.tokenizer, messages, tools)
        except Exception as exc:  # template errors are the request's fault (odd message shapes)
            raise PolicyError(f"cannot render the conversation: {type(exc).__name__}: {exc}") from None
        params = self.sampling(request, len(prompt))
        turn = sum(m.role == "assistant" for m in request.messages)
        sample = await self._submit(prompt, params, turn)
        text = decode_reply(self.ckpt.tokenizer, sample.token_ids)
        stops = [request.stop] if isinstance(request.stop, str) else [s for s in request.stop or [] if s]
        if stops:
            sample, text = self._apply_stop(sample, text, stops)
        parsed = parse_reply(text)
        record = RequestSample(
            seq=next(self._seq),
            session_id=request.session_id,
            turn=turn,
            prompt_ids=prompt,
            token_ids=sample.token_ids,
            logprobs=sample.logprobs,
            finish_reason=sample.finish_reason,
            text=text,
            temperature=params.temperature,
            seed=params.seed if params.seed is not None else -1,
        )
        self.samples[(request.session_id, turn)] = record
        finish: Literal["stop", "tool_calls", "length"] = (
            "tool_calls" if parsed.tool_calls else ("length" if sample.finish_reason == "length" else "stop")
        )
        return Reply(
            content=parsed.content,
            tool_calls=[ToolCall(name=c.name, arguments=c.arguments_json) for c in parsed.tool_calls],
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(sample.token_ids)),
            finish_reason=finish,
        )

    def sampling(self, request: ChatRequest, prompt_len: int) -> SamplingParams:
        """The request's sampling parameters (OpenAI defaults: temperature 1, top_p 1), seed fixed here."""
        max_tokens = request.max_completion_tokens or request.max_tokens or self.default_max_tokens
        room = self.max_context - prompt_len
        if room < 1:
            raise RequestRefused(
                f"the prompt has {prompt_len} tokens; the context holds {self.max_context}",
                param="messages",
                code="context_length_exceeded",
            )
        seed = request.seed
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,), generator=self._seeds).item())
        try:
            return SamplingParams(
                temperature=1.0 if request.temperature is None else request.temperature,
                top_p=1.0 if request.top_p is None else request.top_p,
                max_tokens=min(max_tokens, room),
                seed=seed,
            )
        except ValueError as exc:
            # The message starts with the field: "top_p must be in (0, 1], got 0".
            raise RequestRefused(f"bad sampling parameters: {exc}", param=str(exc).split()[0]) from None

    def _apply_stop(self, sample: Sample, text: str, stops: Sequence[str]) -> tuple[Sample, str]:
        """Cut at the first stop string, as vLLM does: the ids through the token that completes it are
        kept (they were sampled), the text ends before it, and the finish reason is ``stop``."""
        if not any(s in text for s in stops):
            return sample, text
        for k in range(1, len(sample.token_ids) + 1):
            prefix = decode_reply(self.ckpt.tokenizer, sample.token_ids[:k])
            hits = [prefix.index(s) for s in stops if s in prefix]
            if hits:
                cut = Sample(token_ids=sample.token_ids[:k], logprobs=sample.logprobs[:k], finish_reason="stop")
                return cut, prefix[: min(hits)]
        return sample, text

    # -- samples -----------------------------------------------------------------------------------
    def session_samples(self, session_id: str | None, *, pop: bool = False) -> list[RequestSample]:
        """The samples of one session, by turn (removed from the store when ``pop``)."""
        keys = sorted((k for k in self.samples if k[0] == session_id), key=lambda k: k[1])
        out = [self.samples[k] for k in keys]
        if pop:
            for k in keys:
                del self.samples[k]
        return out

    # -- batching ----------------------------------------------------------------------------------
    async def _submit(self, prompt: list[int], params: SamplingParams, turn: int) -> Sample:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            self._loop = loop
            self._queue = asyncio.PriorityQueue()
            self._worker = loop.create_task(self._run())
        assert self._queue is not None
        future: asyncio.Future[Sample] = loop.create_future()
        priority = -turn if self.deepest_first else 0
        await self._queue.put((priority, next(self._arrivals), _Job(prompt, params, future)))
        return await future

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            batch = [(await queue.get())[2]]
            deadline = loop.time() + self.window_s
            while len(batch) < self.max_batch:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append((await asyncio.wait_for(queue.get(), remaining))[2])
                except TimeoutError:
                    break
            while len(batch) < self.max_batch and not queue.empty():
                batch.append(queue.get_nowait()[2])
            live = [job for job in batch if not job.future.cancelled()]
            if not live:
                continue
            try:
                results = await asyncio.to_thread(self._generate, live)
            except Exception as exc:  # every waiting request gets the error, none hangs
                log.exception("tiny.policy.generate_failed", batch=len(live))
                for job in live:
                    if not job.future.done():
                        job.future.set_exception(PolicyError(f"generation failed: {type(exc).__name__}: {exc}"))
                continue
            for job, sample in zip(live, results, strict=True):
                if not job.future.done():
                    job.future.set_result(sample)

    def _generate(self, jobs: Sequence[_Job]) -> list[Sample]:
        with self.model_lock:
            self.batch_sizes.append(len(jobs))
            pad = int(self.ckpt.tokenizer.pad_token_id or 0)
            return generate(
                self.ckpt.model, [j.prompt for j in jobs], [j.params for j in jobs], stop_ids=self._stops, pad_id=pad
            )

    async def aclose(self) -> None:
        """Stop the batching worker (pending requests are cancelled)."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker
            self._worker = None

    def info(self) -> dict[str, Any]:
        return {"model": self.ckpt.name, "parameters": self.ckpt.num_parameters(), "samples": len(self.samples)}
