"""The embedded inner model: tiny Qwen3-architecture LMs that run (and learn) on a CPU.

Two checkpoints live under ``fixtures/tiny/<name>/`` (safetensors + config + tokenizer + ``meta.json``):
``tiny-0.6b`` and ``tiny-1.7b``, stand-ins for ``Qwen/Qwen3-0.6B`` / ``Qwen/Qwen3-1.7B`` (the larger one
has more base skill). ``python -m adapters.tiny.pretrain --seed 0 --out fixtures/tiny`` rebuilds them.
``fixtures/tiny/tiny-agent`` is the CPU replica's trainer agent (same architecture and tokenizer), rebuilt by
``python -m adapters.tiny.agent --seed 0 --out fixtures/tiny``; ``adapters.tiny.agent_play`` plays it.

API summary (names are stable; everything is importable from ``adapters.tiny``)::

    ckpt = load_checkpoint("tiny-0.6b")            # or a directory, or "Qwen/Qwen3-0.6B" (alias)
    ckpt.model        # transformers Qwen3ForCausalLM (float32, eval mode, CPU)
    ckpt.tokenizer    # transformers PreTrainedTokenizerFast with a Qwen3-hermes-style chat template
    ckpt.name, ckpt.path, ckpt.meta (dict from meta.json: seed, command, steps, base scores)

    # Prompts: chat messages (OpenAI dicts) + tool schemas -> token ids ending in "<|im_start|>assistant\\n"
    ids = render_prompt(ckpt.tokenizer, messages, tools)
    # Generated text -> content + tool calls (hermes <tool_call>{"name":..., "arguments":{...}}</tool_call>)
    parsed = parse_reply(text)   # ParsedReply(content: str | None, tool_calls: [ParsedToolCall(name, arguments)])
    parsed.assistant_message()      # the OpenAI assistant message dict to append to the conversation

    # Batched lock-step sampling with KV cache, left padding, explicit position ids.
    params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=128, seed=0)
    samples = generate(ckpt.model, [ids, ...], params, stop_ids=stop_token_ids(ckpt.tokenizer))
    samples[i].token_ids, samples[i].logprobs, samples[i].finish_reason   # "stop" | "length"
    # token_ids include the stop token (<|im_end|>) when finish_reason == "stop"; decode_reply(tok, ids) -> text.
    # logprobs = log_softmax(logits / temperature) of the sampled token, before top-p truncation
    # (temperature 0 = greedy, log-probs then at temperature 1). Each row has its own seeded generator.

    # Training-side log-probs (with grad) of completions given prompts; equal to the sampling-time ones.
    lp = completion_logprobs(ckpt.model, prompts, completions, temperature=1.0)   # list[1-D Tensor]

    # In-process multi-turn episodes (no HTTP): render -> generate -> parse -> run tools -> repeat.
    eps = run_episodes(ckpt, family, tasks, params, max_turns=8)   # list[Episode]
    eps[i].messages, eps[i].turns (TurnSample: prompt_ids, token_ids, logprobs), eps[i].reply, eps[i].reward

    # Hidden-eval score (fast path, batched; parity with the server path is tested).
    report = score_hidden(ckpt, "calc_chain", temperature=1.0, seed=0)   # ScoreReport(score, rewards, ...)

    # OpenAI-compatible server (verifiers-ready SSE), batching concurrent requests.
    async with TinyServer(ckpt) as server:        # server.base_url = "http://127.0.0.1:<port>/v1"
        ...
    server.policy.session_samples(session_id, pop=True)   # [RequestSample(turn, prompt_ids, token_ids, logprobs..)]
    # also GET {base_url}/tiny/samples?session_id=S[&pop=1] (JSON); the X-Session-ID header keys the samples,
    # turn = assistant messages already in the request. Hold server.policy.model_lock while updating weights.
    # Subprocess: python -m adapters.tiny --model tiny-0.6b --port 0   (prints the base URL)

    # SFT helpers (used by pretrain): encode_conversation(tok, messages, tools) -> (ids, assistant_mask)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .chat import ParsedReply, ParsedToolCall, parse_reply, render_prompt, render_text
    from .episodes import Episode, TurnSample, request_seed, run_episodes
    from .generate import Sample, SamplingParams, completion_logprobs, generate
    from .model import Checkpoint, load_checkpoint, save_checkpoint
    from .policy import RequestSample, TinyPolicy
    from .scorer import ScoreReport, eval_max_turns, score_hidden, score_tasks
    from .server import TinyServer
    from .sft import encode_conversation, sft_loss
    from .specs import MODEL_SPECS, ModelSpec, resolve_model_name
    from .tokenizer import decode_reply, stop_token_ids

# Lazy: importing one piece (the chat format, the tokenizer) must not load torch and transformers.
_WHERE = {
    "ParsedReply": "chat",
    "ParsedToolCall": "chat",
    "parse_reply": "chat",
    "render_prompt": "chat",
    "render_text": "chat",
    "Episode": "episodes",
    "TurnSample": "episodes",
    "request_seed": "episodes",
    "run_episodes": "episodes",
    "Sample": "generate",
    "SamplingParams": "generate",
    "completion_logprobs": "generate",
    "generate": "generate",
    "MODEL_SPECS": "specs",
    "Checkpoint": "model",
    "ModelSpec": "specs",
    "load_checkpoint": "model",
    "resolve_model_name": "specs",
    "save_checkpoint": "model",
    "RequestSample": "policy",
    "TinyPolicy": "policy",
    "ScoreReport": "scorer",
    "eval_max_turns": "scorer",
    "score_hidden": "scorer",
    "score_tasks": "scorer",
    "TinyServer": "server",
    "encode_conversation": "sft",
    "sft_loss": "sft",
    "decode_reply": "tokenizer",
    "stop_token_ids": "tokenizer",
}

__getattr__ = lazy_exports(__name__, _WHERE)


__all__ = [
    "MODEL_SPECS",
    "Checkpoint",
    "Episode",
    "ModelSpec",
    "ParsedReply",
    "ParsedToolCall",
    "RequestSample",
    "Sample",
    "SamplingParams",
    "ScoreReport",
    "TinyPolicy",
    "TinyServer",
    "TurnSample",
    "completion_logprobs",
    "decode_reply",
    "encode_conversation",
    "eval_max_turns",
    "generate",
    "load_checkpoint",
    "parse_reply",
    "render_prompt",
    "render_text",
    "request_seed",
    "resolve_model_name",
    "run_episodes",
    "save_checkpoint",
    "score_hidden",
    "score_tasks",
    "sft_loss",
    "stop_token_ids",
]
