"""Throughput of the tiny models on this CPU: generation and training tokens per second, and eval time.

    .venv/bin/python benchmarks/tiny_bench.py [--threads 1] [--json out.json]

For each model (the committed checkpoint under fixtures/tiny when present, else a random init of the
same size): batched sampling (64 calc_chain prompts, 64 new tokens each, temperature 1; prefill
included), a training step's forward + backward on 16 SFT conversations, and one in-process hidden
eval of calc_chain (200 tasks, temperature 1). Times are process CPU seconds (on a machine shared with
other work, wall time is longer and noisier); tokens/s counts real (unpadded) tokens.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.tiny.chat import render_prompt
from adapters.tiny.generate import SamplingParams, generate
from adapters.tiny.model import MODEL_SPECS, Checkpoint, build_model, load_checkpoint
from adapters.tiny.pretrain import build_tokenizer
from adapters.tiny.scorer import score_hidden
from adapters.tiny.sft import encode_conversation, sft_loss
from adapters.tiny.traces import trace_messages
from families import SYSTEM_PROMPT, get_family, hidden_tasks


def _checkpoint(name: str) -> tuple[Checkpoint, str]:
    try:
        return load_checkpoint(name), "fixture"
    except FileNotFoundError:
        tok = build_tokenizer(0)
        return Checkpoint(name, build_model(MODEL_SPECS[name], tok, 0), tok), "random-init"


def _timed(fn: Any) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def bench(name: str) -> dict[str, Any]:
    ckpt, source = _checkpoint(name)
    fam = get_family("calc_chain")
    tasks = list(hidden_tasks(fam))[:64]
    prompts = [
        render_prompt(
            ckpt.tokenizer,
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": t.prompt}],
            fam.tool_schemas(),
        )
        for t in tasks
    ]
    params = SamplingParams(temperature=1.0, max_tokens=64, seed=0)
    # No stop tokens: every row generates exactly 64 tokens, so the count is the batch's work.
    samples, gen_cpu, gen_wall = _timed(lambda: generate(ckpt.model, prompts, params, stop_ids=[]))
    new_tokens = sum(len(s.token_ids) for s in samples)

    rng = random.Random(0)
    batch = [
        encode_conversation(ckpt.tokenizer, trace_messages(fam, fam.generate("train", s), rng, 0.0), fam.tool_schemas())
        for s in range(16)
    ]
    train_tokens = sum(len(ids) for ids, _ in batch)
    ckpt.model.train()

    def step() -> None:
        loss = sft_loss(ckpt.model, batch, pad_id=int(ckpt.tokenizer.pad_token_id or 0))
        loss.backward()  # type: ignore[no-untyped-call]
        ckpt.model.zero_grad(set_to_none=True)

    step()  # warm-up
    reps = 3

    def steps() -> None:
        for _ in range(reps):
            step()

    _, train_cpu, train_wall = _timed(steps)
    ckpt.model.train(False)
    report, eval_cpu, eval_wall = _timed(lambda: score_hidden(ckpt, fam, temperature=1.0, seed=0))
    return {
        "model": name,
        "source": source,
        "parameters": ckpt.num_parameters(),
        "generate": {
            "batch": len(prompts),
            "prompt_tokens_mean": round(sum(map(len, prompts)) / len(prompts), 1),
            "new_tokens": new_tokens,
            "cpu_s": round(gen_cpu, 2),
            "wall_s": round(gen_wall, 2),
            "new_tok_per_cpu_s": round(new_tokens / gen_cpu),
        },
        "train": {
            "batch": len(batch),
            "tokens_per_step": train_tokens,
            "cpu_s_per_step": round(train_cpu / reps, 2),
            "wall_s_per_step": round(train_wall / reps, 2),
            "tok_per_cpu_s": round(train_tokens * reps / train_cpu),
        },
        "hidden_eval_calc_chain": {
            "tasks": report.n,
            "score_t1": report.score,
            "cpu_s": round(eval_cpu, 2),
            "wall_s": round(eval_wall, 2),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", default=",".join(MODEL_SPECS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = [bench(name) for name in args.models.split(",")]
    text = json.dumps({"threads": args.threads, "torch": torch.__version__, "results": results}, indent=2)
    sys.stdout.write(text + "\n")
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
