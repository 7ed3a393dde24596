"""Reproducibly pre-train the tiny models: a tokenizer, then SFT on (noisy) reference-solver traces.

    python -m adapters.tiny.pretrain --seed 0 --out fixtures/tiny

1. Tokenizer: byte-level BPE trained on rendered conversations of every family (the held-out one too:
   a real tokenizer covers all text; it carries no skill).
2. For each model: SFT from a seeded random init on fresh traces of the SFT families' ``train`` split,
   ``noise`` of them carrying one mistake (see :mod:`.traces`). The step counts are chosen so that the
   bases are partial on the hidden evals at temperature 1 (far from 0 and from 1), the larger model
   more skilled than the smaller.
3. Each checkpoint is saved with its tokenizer and a ``meta.json`` recording the seed, the command, the
   training settings and the measured hidden-eval scores of every family.

The held-out family (``triage``) is kept out of SFT so its base skill is not planted. Runs with one
torch thread so that the result does not depend on the thread count.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog
import torch
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from families import FAMILIES, get_family

from .chat import SPECIAL_TOKENS, TEXT_TOKENS, render_text
from .model import MODEL_SPECS, Checkpoint, ModelSpec, build_model, save_checkpoint
from .scorer import DEFAULT_MAX_TOKENS, EVAL_TEMPERATURE, score_hidden
from .sft import copy_batch, encode_conversation, sft_loss
from .tokenizer import train_tokenizer, wrap_tokenizer
from .traces import trace_messages

__all__ = ["SFT_FAMILIES", "TrainSettings", "build_tokenizer", "main", "sft_model"]

log = structlog.get_logger(__name__)

# Families a model with a few hundred thousand parameters can learn from traces (copying values through
# tool calls). dispatch (rule evaluation) stays out: its base would be ~0 either way.
SFT_FAMILIES: tuple[str, ...] = ("calc_chain", "string_pipeline", "ledger", "multi_hop")


class TrainSettings(msgspec.Struct, frozen=True, kw_only=True):
    steps: int  # SFT steps
    batch: int
    lr: float
    warmup: int
    noise: float  # fraction of traces with one mistake
    copy_steps: int = 200  # induction warm-up steps before SFT (see sft.copy_batch)
    copy_batch: int = 64
    copy_length: int = 64

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


# Per model: (steps, batch, lr, warmup, noise). Measured to give partial bases (see fixtures/tiny/README.md).
DEFAULTS: dict[str, TrainSettings] = {
    "tiny-0.6b": TrainSettings(steps=300, batch=32, lr=3e-3, warmup=20, noise=0.4),
    "tiny-1.7b": TrainSettings(steps=300, batch=32, lr=2e-3, warmup=20, noise=0.4),
}


def _conversations(names: Sequence[str], seed: int, noise: float) -> Iterator[tuple[list[dict[str, Any]], list[Any]]]:
    """Endless (messages, tools) from the train split, families drawn uniformly, seeded."""
    rng = random.Random(seed)
    fams = [get_family(n) for n in names]
    schemas = {f.name: f.tool_schemas() for f in fams}
    counter = 0
    while True:
        fam = rng.choice(fams)
        task = fam.generate("train", seed * 1_000_003 + counter)
        counter += 1
        yield trace_messages(fam, task, rng, noise), schemas[fam.name]


def _batches(
    tokenizer: PreTrainedTokenizerFast, stream: Iterator[tuple[list[dict[str, Any]], list[Any]]], batch: int, seed: int
) -> Iterator[list[tuple[list[int], list[bool]]]]:
    """Batches of encoded conversations, bucketed by length: a pool of 8 batches is sorted by length and
    cut into batches served in random order, so little compute goes to padding."""
    rng = random.Random(seed)
    while True:
        pool = sorted(
            (encode_conversation(tokenizer, *next(stream)) for _ in range(8 * batch)), key=lambda e: len(e[0])
        )
        chunks = [pool[i : i + batch] for i in range(0, len(pool), batch)]
        rng.shuffle(chunks)
        yield from chunks


def build_tokenizer(seed: int, per_family: int = 300, vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    renderer = wrap_tokenizer(Tokenizer(models.BPE()))  # an empty vocabulary renders the template just as well
    texts: list[str] = []
    for name in FAMILIES:
        stream = _conversations([name], seed + 7919, noise=0.4)
        for _ in range(per_family):
            messages, tools = next(stream)
            texts.append(render_text(renderer, messages, tools, add_generation_prompt=False))
    return train_tokenizer(texts, vocab_size=vocab_size)


def _lr_at(step: int, settings: TrainSettings) -> float:
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _copy_warmup(
    model: Qwen3ForCausalLM, tokenizer: PreTrainedTokenizerFast, settings: TrainSettings, seed: int
) -> None:
    """Stage 0: form the copying circuit on synthetic repeated segments of ordinary (non-control) tokens."""
    if settings.copy_steps <= 0:
        return
    rng = random.Random(seed + 1)
    controls = {tokenizer.convert_tokens_to_ids(t) for t in (*SPECIAL_TOKENS, *TEXT_TOKENS)}
    pool = [i for i in range(len(tokenizer)) if i not in controls]
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.95), weight_decay=0.01)
    pad = int(tokenizer.pad_token_id or 0)
    model.train()
    for step in range(settings.copy_steps):
        for group in opt.param_groups:
            group["lr"] = settings.lr * min(1.0, (step + 1) / settings.warmup)
        loss = sft_loss(model, copy_batch(rng, pool, settings.copy_batch, settings.copy_length), pad)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 50 == 0:
            log.info("tiny.copy_warmup.step", step=step + 1, loss=round(float(loss.detach()), 4))


def sft_model(
    spec: ModelSpec,
    tokenizer: PreTrainedTokenizerFast,
    settings: TrainSettings,
    seed: int,
    *,
    families: Sequence[str] = SFT_FAMILIES,
    eval_every: int = 0,
    eval_limit: int = 40,
    snapshot_dir: Path | None = None,
) -> tuple[Checkpoint, list[dict[str, Any]]]:
    """SFT one model from a seeded init; returns it and the training log (loss, optional quick evals)."""
    model = build_model(spec, tokenizer, seed)
    ckpt = Checkpoint(spec.name, model, tokenizer)
    pad = int(tokenizer.pad_token_id or 0)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.95), weight_decay=0.01)
    _copy_warmup(model, tokenizer, settings, seed)
    batches = _batches(tokenizer, _conversations(families, seed, settings.noise), settings.batch, seed)
    history: list[dict[str, Any]] = []
    started = time.process_time()
    tokens = 0
    for step in range(settings.steps):
        model.train()
        batch = next(batches)
        tokens += sum(len(ids) for ids, _ in batch)
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, settings)
        loss = sft_loss(model, batch, pad)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        entry: dict[str, Any] = {"step": step + 1, "loss": round(float(loss.detach()), 4)}
        if eval_every and (step + 1) % eval_every == 0:
            model.train(False)
            entry["eval"] = {
                n: score_hidden(ckpt, n, temperature=EVAL_TEMPERATURE, limit=eval_limit).score for n in families
            }
            entry["eval_greedy"] = {n: score_hidden(ckpt, n, temperature=0.0, limit=eval_limit).score for n in families}
            if snapshot_dir is not None:
                save_checkpoint(ckpt, snapshot_dir / f"{spec.name}-step{step + 1}", {"name": spec.name, **entry})
        if eval_every and ((step + 1) % 10 == 0 or "eval" in entry):
            entry["cpu_s"] = round(time.process_time() - started, 1)
            entry["tok_per_s"] = round(tokens / max(1e-9, time.process_time() - started))
            log.info("tiny.sft.step", model=spec.name, **entry)
        history.append(entry)
    model.train(False)
    return ckpt, history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("fixtures/tiny"))
    parser.add_argument("--models", default=",".join(MODEL_SPECS), help="comma-separated model names")
    parser.add_argument("--steps", type=int, default=None, help="override the per-model step count")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--noise", type=float, default=None)
    parser.add_argument("--copy-steps", type=int, default=None)
    parser.add_argument("--families", default=",".join(SFT_FAMILIES))
    parser.add_argument("--eval-every", type=int, default=0, help="quick hidden evals while training (tuning)")
    parser.add_argument("--snapshots", type=Path, default=None, help="save a checkpoint at every quick eval")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    command = "python -m adapters.tiny.pretrain " + " ".join(sys.argv[1:] if argv is None else argv)
    started = time.process_time()
    tokenizer = build_tokenizer(args.seed)
    metas: list[dict[str, Any]] = []
    log.info("tiny.pretrain.tokenizer", vocab=len(tokenizer), cpu_s=round(time.process_time() - started, 1))
    for name in args.models.split(","):
        spec = MODEL_SPECS[name]
        base = DEFAULTS[name]
        settings = TrainSettings(
            steps=args.steps or base.steps,
            batch=args.batch or base.batch,
            lr=args.lr or base.lr,
            warmup=base.warmup,
            noise=base.noise if args.noise is None else args.noise,
            copy_steps=base.copy_steps if args.copy_steps is None else args.copy_steps,
        )
        families = tuple(args.families.split(","))
        t0 = time.process_time()
        ckpt, history = sft_model(
            spec,
            tokenizer,
            settings,
            args.seed,
            families=families,
            eval_every=args.eval_every,
            snapshot_dir=args.snapshots,
        )
        train_s = time.process_time() - t0
        scores = {}
        for fam in FAMILIES:
            report = score_hidden(ckpt, fam, temperature=EVAL_TEMPERATURE, seed=args.seed)
            greedy = score_hidden(ckpt, fam, temperature=0.0, seed=args.seed)
            scores[fam] = {"t1": report.score, "greedy": greedy.score, "answered_t1": report.answered}
        log.info("tiny.pretrain.scores", model=name, train_cpu_s=round(train_s, 1), **scores)
        meta: dict[str, Any] = {
            "name": name,
            "stands_in_for": spec.stands_in_for,
            "parameters": ckpt.num_parameters(),
            "seed": args.seed,
            "command": command,
            "sft_families": list(families),
            "train": settings.as_dict(),
            "final_loss": history[-1]["loss"] if history else None,
            "train_cpu_s": round(train_s, 1),
            "base_scores": scores,
            "score_settings": {
                "split": "hidden",
                "temperature_t1": EVAL_TEMPERATURE,
                "top_p": 1.0,
                "max_tokens": DEFAULT_MAX_TOKENS,
                "seed": args.seed,
            },
            "versions": {"torch": torch.__version__},
        }
        metas.append(meta)
        if not args.no_save:
            save_checkpoint(ckpt, args.out / name, meta)
    if not args.no_save:
        (args.out / "README.md").write_text(readme(metas, round(time.process_time() - started, 1)))
    log.info("tiny.pretrain.done", cpu_s=round(time.process_time() - started, 1))
    return 0


def readme(metas: Sequence[dict[str, Any]], total_cpu_s: float) -> str:
    """The fixtures' README: how the checkpoints were made and what they score (from their meta.json)."""
    lines = [
        "# Tiny Qwen3 checkpoints (generated by adapters/tiny/pretrain.py; do not edit)",
        "",
        "Stand-ins for the Qwen3 base models on a CPU. Rebuild (same bytes on the same torch version):",
        "",
        f"    {metas[0]['command'] if metas else 'python -m adapters.tiny.pretrain --seed 0 --out fixtures/tiny'}",
        "",
        f"Total pre-training time: {total_cpu_s} CPU-s (one torch thread), tokenizer and scoring included.",
        "Scores: mean reward on each family's 200 hidden tasks, in process (adapters.tiny.scorer), max 96",
        "new tokens a turn, the spec's turn limit; `t1` samples at temperature 1 (the eval setting), `greedy`",
        "at temperature 0. `triage` (held out) and `dispatch` are not in the SFT data.",
        "",
    ]
    families = list(metas[0]["base_scores"]) if metas else []
    for meta in metas:
        train = meta["train"]
        lines += [
            f"## {meta['name']} (stands in for {meta['stands_in_for']})",
            "",
            f"- {meta['parameters']:,} parameters; seed {meta['seed']}; SFT on {', '.join(meta['sft_families'])}",
            f"- {train['steps']} steps x batch {train['batch']}, AdamW lr {train['lr']} (warmup {train['warmup']},"
            f" cosine to 10%), noise {train['noise']}; final loss {meta['final_loss']}; {meta['train_cpu_s']} CPU-s",
            "",
            "| family | t1 | greedy |",
            "|---|---|---|",
            *(
                f"| {f} | {meta['base_scores'][f]['t1']:.3f} | {meta['base_scores'][f]['greedy']:.3f} |"
                for f in families
            ),
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
