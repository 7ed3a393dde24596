"""In-process multi-turn episodes: the tiny model solves family tasks with the family's tools, batched.

This is the fast path beside the HTTP server: every turn, each unfinished episode's conversation is
rendered by the chat template (exactly as the server renders a request's messages), all of them are
sampled in one :func:`generate` batch, replies are parsed, tool calls run on the task's own toolbox and
their results appended as ``tool`` messages, just as an OpenAI client loop would. An episode ends at a
reply without tool calls (its text is the final reply) or after ``max_turns`` assistant turns (the last
assistant text is the reply, as with verifiers' ``last_reply``).

Per-request seeds: when ``params.seed`` is set, the request for (episode ``i``, turn ``t``) samples with
:func:`request_seed` ``(seed, i, t)``; a client sending those seeds to the server one request at a time
samples the same tokens.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import msgspec
import structlog
import torch

from families import SYSTEM_PROMPT, Family, Task, ToolBox

from .chat import parse_reply, render_prompt
from .generate import SamplingParams, generate
from .model import Checkpoint
from .tokenizer import decode_reply, stop_token_ids

__all__ = ["Episode", "TurnCallback", "TurnSample", "request_seed", "run_episodes"]

log = structlog.get_logger(__name__)

TurnCallback = Callable[[int, int, int, int], None]  # (turns played, max turns, episodes finished, episodes)

Stop = Literal["answered", "max_turns"]


class TurnSample(msgspec.Struct, frozen=True, kw_only=True):
    """One assistant turn: the rendered prompt, the sampled ids (stop token included) and their log-probs."""

    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


class Episode(msgspec.Struct, kw_only=True):
    task: Task
    messages: list[dict[str, Any]]
    turns: list[TurnSample] = []
    reply: str = ""
    reward: float = 0.0
    stop: Stop = "max_turns"


def request_seed(seed: int, episode: int, turn: int) -> int:
    """The sampling seed of one request, stable across processes."""
    digest = hashlib.sha256(f"{seed}|{episode}|{turn}".encode()).digest()
    return int.from_bytes(digest[:7], "big")


def _call_tool(box: ToolBox, name: str, arguments: Mapping[str, Any], task_id: str) -> str:
    try:
        return box.call(name, arguments)
    except Exception as exc:  # a garbled call must not end the eval; the model sees the error, as in an env
        log.warning("tiny.episodes.tool_crashed", task=task_id, tool=name, error=f"{type(exc).__name__}: {exc}")
        return f"error: {type(exc).__name__}: {exc}"


def run_episodes(
    ckpt: Checkpoint,
    family: Family,
    tasks: Sequence[Task],
    params: SamplingParams,
    *,
    max_turns: int,
    system_prompt: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    seed_source: torch.Generator | None = None,
    batch_size: int = 64,
    on_turn: TurnCallback | None = None,
) -> list[Episode]:
    """Run one episode per task (repeat a task in ``tasks`` for a group); rewards from ``family.score``.

    At most ``batch_size`` conversations share a generate call (bounds the attention memory). ``on_turn``
    hears ``(turns played, max_turns, episodes finished, episodes)`` after each turn (for progress bars).
    """
    schemas = list(tools) if tools is not None else family.tool_schemas()
    sys_text = SYSTEM_PROMPT if system_prompt is None else system_prompt
    episodes = [
        Episode(task=t, messages=[{"role": "system", "content": sys_text}, {"role": "user", "content": t.prompt}])
        for t in tasks
    ]
    boxes = [family.tools(t) for t in tasks]
    stops = stop_token_ids(ckpt.tokenizer)
    pad = int(ckpt.tokenizer.pad_token_id or 0)
    started = time.perf_counter()
    live = list(range(len(episodes)))
    for turn in range(max_turns):
        if not live:
            break
        prompts = [render_prompt(ckpt.tokenizer, episodes[i].messages, schemas) for i in live]
        row_params = [
            params if params.seed is None else msgspec.structs.replace(params, seed=request_seed(params.seed, i, turn))
            for i in live
        ]
        samples = []
        for lo in range(0, len(live), batch_size):
            samples += generate(
                ckpt.model,
                prompts[lo : lo + batch_size],
                row_params[lo : lo + batch_size],
                stop_ids=stops,
                pad_id=pad,
                seed_source=seed_source,
            )
        still: list[int] = []
        for i, prompt, sample in zip(live, prompts, samples, strict=True):
            ep = episodes[i]
            ep.turns.append(
                TurnSample(
                    prompt_ids=prompt,
                    token_ids=sample.token_ids,
                    logprobs=sample.logprobs,
                    finish_reason=sample.finish_reason,
                )
            )
            text = decode_reply(ckpt.tokenizer, sample.token_ids)
            parsed = parse_reply(text)
            call_ids = [f"call_{turn}_{k}" for k in range(len(parsed.tool_calls))]
            ep.messages.append(parsed.assistant_message(call_ids))
            ep.reply = parsed.content or ""
            if not parsed.tool_calls:
                ep.stop = "answered"
                continue
            for cid, call in zip(call_ids, parsed.tool_calls, strict=True):
                result = _call_tool(boxes[i], call.name, call.arguments, ep.task.id)
                ep.messages.append({"role": "tool", "tool_call_id": cid, "name": call.name, "content": result})
            still.append(i)
        live = still
        if on_turn is not None:
            on_turn(turn + 1, max_turns, len(episodes) - len(live), len(episodes))
    for ep in episodes:
        ep.reward = float(family.score(ep.task, ep.reply))
    log.debug("tiny.episodes.done", n=len(episodes), seconds=round(time.perf_counter() - started, 3))
    return episodes
