"""The tiny server over HTTP: the SSE sequence the verifiers client needs, tool calls, samples, batching."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from adapters.openai_server import ChatRequest, Message
from families import SYSTEM_PROMPT, get_family

FAMILY = get_family("calc_chain")


def _body(prompt: str, **extra):
    return {
        "model": "tiny",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
        "tools": FAMILY.tool_schemas(),
        **extra,
    }


def _events(raw: str) -> list:
    blocks = [b for b in raw.split("\n\n") if b.strip()]
    assert all(b.startswith("data: ") for b in blocks), blocks
    payloads = [b.removeprefix("data: ") for b in blocks]
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


async def _post(client: httpx.AsyncClient, url: str, body: dict, session: str) -> str:
    async with client.stream("POST", url, json=body, headers={"X-Session-ID": session}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        return "".join([chunk async for chunk in resp.aiter_text()])


async def test_stream_shape_usage_and_samples(micro_ckpt):
    import torch

    from adapters.tiny.chat import render_prompt
    from adapters.tiny.generate import completion_logprobs
    from adapters.tiny.server import TinyServer

    async with TinyServer(micro_ckpt) as server, httpx.AsyncClient(timeout=60) as client:
        raw = await _post(
            client, server.base_url + "/chat/completions", _body("Start with 2.", max_tokens=7, seed=3), "s1"
        )
        events = _events(raw)
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert events[0]["object"] == "chat.completion.chunk"
        finish = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
        assert len(finish) == 1 and finish[0]["choices"][0]["delta"] == {}
        usage = events[-1]
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] <= 7
        assert len({e["id"] for e in events}) == 1

        resp = await client.get(server.base_url + "/tiny/samples", params={"session_id": "s1"})
        rows = resp.json()["samples"]
        assert [r["turn"] for r in rows] == [0]
        row = rows[0]
        assert len(row["token_ids"]) == len(row["logprobs"]) == usage["usage"]["completion_tokens"]
        assert row["prompt_ids"] == render_prompt(
            micro_ckpt.tokenizer, _body("Start with 2.")["messages"], FAMILY.tool_schemas()
        )
        assert usage["usage"]["prompt_tokens"] == len(row["prompt_ids"])
        # The kept log-probs are the trainer's: same numbers from a full forward pass.
        with torch.no_grad():
            lp = completion_logprobs(micro_ckpt.model, [row["prompt_ids"]], [row["token_ids"]])[0]
        assert float((torch.exp(lp - torch.tensor(row["logprobs"])) - 1).abs().max()) < 1e-4
        # The same seed gives the same sample; the text streamed is the decoded sample.
        raw2 = await _post(
            client, server.base_url + "/chat/completions", _body("Start with 2.", max_tokens=7, seed=3), "s2"
        )
        again = (await client.get(server.base_url + "/tiny/samples", params={"session_id": "s2", "pop": "1"})).json()
        assert again["samples"][0]["token_ids"] == row["token_ids"]
        assert not (await client.get(server.base_url + "/tiny/samples", params={"session_id": "s2"})).json()["samples"]
        assert raw2.count("data: ") == raw.count("data: ")


async def test_tool_call_text_becomes_tool_calls_delta(micro_ckpt, monkeypatch):
    # The decode is replaced so the micro model "says" a tool call: the text -> Reply -> SSE path is tested.
    from adapters.tiny.policy import TinyPolicy
    from adapters.tiny.server import TinyServer

    policy = TinyPolicy(micro_ckpt)
    text = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 5}}\n</tool_call>'
    monkeypatch.setattr(micro_ckpt.tokenizer, "decode", lambda ids, skip_special_tokens=False: text)
    async with TinyServer(policy) as server, httpx.AsyncClient(timeout=60) as client:
        events = _events(
            await _post(client, server.base_url + "/chat/completions", _body("Start with 2.", max_tokens=3), "t")
        )
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert len(calls) == 1
    assert calls[0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 5}'}
    assert calls[0]["type"] == "function" and calls[0]["id"]
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"] and e["choices"][0]["finish_reason"]] == [
        "tool_calls"
    ]


async def test_concurrent_requests_share_a_batch(micro_ckpt):
    from adapters.tiny.policy import TinyPolicy
    from adapters.tiny.server import TinyServer

    policy = TinyPolicy(micro_ckpt, window_ms=50)
    async with TinyServer(policy) as server, httpx.AsyncClient(timeout=60) as client:
        url = server.base_url + "/chat/completions"
        raws = await asyncio.gather(
            *(_post(client, url, _body(f"Start with {i}.", max_tokens=4, seed=i), f"c{i}") for i in range(6))
        )
    assert all(r.endswith("data: [DONE]\n\n") for r in raws)
    assert max(policy.batch_sizes) > 1
    assert sum(policy.batch_sizes) == 6


async def test_sampling_parameters_reach_the_sampler(micro_ckpt):
    from adapters.tiny.policy import TinyPolicy

    policy = TinyPolicy(micro_ckpt, default_max_tokens=11)
    request = ChatRequest(
        model="m",
        messages=[Message(role="user", content="hi")],
        temperature=0.3,
        top_p=0.5,
        max_completion_tokens=9,
        seed=4,
    )
    params = policy.sampling(request, prompt_len=10)
    assert (params.temperature, params.top_p, params.max_tokens, params.seed) == (0.3, 0.5, 9, 4)
    default = policy.sampling(ChatRequest(model="m", messages=[Message(role="user", content="hi")]), prompt_len=10)
    assert default.temperature == 1.0 and default.top_p == 1.0 and default.max_tokens == 11 and default.seed is not None


async def test_bad_sampling_parameter_is_an_error_not_a_hang(micro_ckpt):
    from adapters.tiny.server import TinyServer

    async with TinyServer(micro_ckpt) as server, httpx.AsyncClient(timeout=60) as client:
        resp = await client.post(server.base_url + "/chat/completions", json=_body("x", top_p=0))
    assert resp.status_code == 400  # the caller's fault: a client must not retry it
    error = resp.json()["error"]
    assert "top_p" in error["message"] and error["param"] == "top_p" and error["type"] == "invalid_request_error"


async def test_a_prompt_longer_than_the_context_is_a_400_naming_the_limit(micro_ckpt):
    from adapters.tiny.server import TinyServer

    limit = micro_ckpt.model.config.max_position_embeddings  # the server's context is the model's own
    async with TinyServer(micro_ckpt) as server, httpx.AsyncClient(timeout=60) as client:
        fits = await client.post(server.base_url + "/chat/completions", json=_body("hi", max_tokens=2))
        # Past 2,048 (the cap it had, which refused the tiny agent's second attempts) but inside the model.
        longer = await client.post(server.base_url + "/chat/completions", json=_body("word " * 450, max_tokens=2))
        resp = await client.post(server.base_url + "/chat/completions", json=_body("word " * limit, max_tokens=2))
    assert fits.status_code == 200  # the route serves a prompt that fits
    assert longer.status_code == 200, longer.text
    usage = [json.loads(line[6:]) for line in longer.text.splitlines() if line.startswith("data: {")][-1]["usage"]
    assert usage["prompt_tokens"] > 2048
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert f"the context holds {limit}" in error["message"]


@pytest.mark.parametrize("path", ["/tiny/samples", "/tiny/info"])
async def test_trainer_routes(micro_ckpt, path):
    from adapters.tiny.server import TinyServer

    async with TinyServer(micro_ckpt) as server, httpx.AsyncClient(timeout=60) as client:
        resp = await client.get(server.base_url + path)
    if path.endswith("samples"):
        assert resp.status_code == 400 and "session_id" in resp.json()["error"]["message"]
    else:
        assert resp.json()["model"] == "micro"


async def test_stop_string_cuts_text_tokens_and_logprobs(micro_ckpt):
    from adapters.tiny.policy import TinyPolicy
    from adapters.tiny.tokenizer import decode_reply

    policy = TinyPolicy(micro_ckpt)
    messages = [Message(role="user", content="Start with 5.")]
    free = await policy.respond(ChatRequest(model="m", messages=messages, seed=9, max_tokens=12))
    full = policy.samples[(None, 0)]
    # A stop string that first completes at sampled token k (the first token whose text is new).
    dec = micro_ckpt.tokenizer
    k = next(
        i
        for i in range(1, len(full.token_ids))
        if (piece := decode_reply(dec, full.token_ids[i : i + 1])).strip()
        and piece not in decode_reply(dec, full.token_ids[:i])
    )
    stop = decode_reply(dec, full.token_ids[k : k + 1])
    cut = await policy.respond(ChatRequest(model="m", messages=messages, seed=9, max_tokens=12, stop=[stop]))
    row = policy.samples[(None, 0)]
    assert row.token_ids == full.token_ids[: k + 1] and row.logprobs == full.logprobs[: k + 1]
    assert row.finish_reason == "stop"
    assert stop not in (cut.content or "") and (free.content or "").startswith((cut.content or "").strip())
    await policy.aclose()


def _conversation(session: str, turns: int, seed: int) -> ChatRequest:
    """A request ``turns`` assistant turns into its conversation."""
    messages = [Message(role="user", content="Start with 3.")]
    for t in range(turns):
        messages += [Message(role="assistant", content=f"step {t}"), Message(role="user", content="go on")]
    return ChatRequest(model="tiny", messages=messages, max_tokens=3, seed=seed, session_id=session)


async def _served_order(ckpt, *, deepest_first: bool) -> tuple[list[str], dict[str, list[int]]]:
    """Which of four waiting requests the one-at-a-time worker serves in which order, and what each sampled."""
    from adapters.tiny.policy import TinyPolicy

    policy = TinyPolicy(ckpt, max_batch=1, deepest_first=deepest_first)
    depth = {"first": 0, "a": 0, "b": 2, "c": 1}  # "first" occupies the worker while the others queue up
    policy.model_lock.acquire()  # the worker's first generate waits here, so the other three wait in the queue
    try:
        tasks = [asyncio.create_task(policy.respond(_conversation("first", 0, seed=0)))]
        await asyncio.sleep(0.2)
        for i, s in enumerate(("a", "b", "c"), start=1):
            tasks.append(asyncio.create_task(policy.respond(_conversation(s, depth[s], seed=i))))
        await asyncio.sleep(0.2)
    finally:
        policy.model_lock.release()
    await asyncio.gather(*tasks)
    await policy.aclose()
    order = sorted(policy.samples.values(), key=lambda r: r.seq)
    return [str(r.session_id) for r in order], {str(r.session_id): r.token_ids for r in order}


async def test_deepest_first_serves_the_request_furthest_into_its_conversation_first(micro_ckpt):
    arrival, arrival_tokens = await _served_order(micro_ckpt, deepest_first=False)
    assert arrival == ["first", "a", "b", "c"]  # the baseline: the queue really held all three, served FIFO
    deepest, deepest_tokens = await _served_order(micro_ckpt, deepest_first=True)
    assert deepest == ["first", "b", "c", "a"]  # 2 turns in, then 1, then 0
    assert deepest_tokens == arrival_tokens  # the order changes nothing a request samples (seeded per request)
