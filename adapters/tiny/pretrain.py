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
import copy
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog
import torch
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

from families import FAMILIES, current_key, get_family

from .chat import SPECIAL_TOKENS, TEXT_TOKENS, render_text
from .model import (
    FIXTURE_DIR,
    MODEL_SPECS,
    Checkpoint,
    ModelSpec,
    build_model,
    grow_model,
    load_checkpoint,
    save_checkpoint,
)
from .readme import readme, write_readme
from .scorer import DEFAULT_MAX_TOKENS, EVAL_TEMPERATURE, score_hidden
from .sft import copy_batch, encode_conversation, sft_loss
from .thoughts import TOKENIZER_NOTE_FAMILIES
from .tokenizer import train_tokenizer, wrap_tokenizer
from .traces import trace_messages

__all__ = ["SFT_FAMILIES", "STAGE2", "TrainSettings", "build_tokenizer", "main", "readme", "sft_model"]

log = structlog.get_logger(__name__)

# Families a model with a few hundred thousand parameters learns from traces in CPU minutes: chains of
# instructions carried out one tool call each (with notes, see thoughts.py). multi_hop (reading the
# question backwards) and dispatch (rule evaluation) stay out: their bases stay near 0.
SFT_FAMILIES: tuple[str, ...] = ("calc_chain", "string_pipeline", "ledger")


class TrainSettings(msgspec.Struct, frozen=True, kw_only=True):
    steps: int  # SFT steps
    batch: int
    lr: float
    warmup: int
    noise: float  # fraction of traces with one mistake (unless family_noise names the family)
    family_noise: dict[str, float] = {}
    copy_steps: int = 300  # induction warm-up steps before SFT (see sft.copy_batch)
    copy_batch: int = 32
    copy_length: int = 32
    copy_lr: float = 1e-3  # at 3e-3 the induction circuit did not form within 400 steps; at 1e-3 by ~250
    copy_pool: int = 128  # the most frequent ordinary tokens of the corpus (a 1000-token pool learns far slower)
    grow_from: str | None = None  # start from this trained model, grown function-preservingly (model.grow_model)
    data_offset: int = 0  # shifts the trace stream's seed, so a grown model sees traces its parent did not
    family_weights: dict[str, float] = {}  # draw families with these weights (empty: uniformly, as stage 1)

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


# Mistake rates per family: the harder a family is for these models, the less noise it needs for a base
# that is partial (far from 0 and 1) when sampled at temperature 1.
FAMILY_NOISE: dict[str, float] = {"calc_chain": 0.3, "string_pipeline": 0.2, "ledger": 0.4}
# Stage 1 (committed under fixtures/tiny/stage1): chosen by measurement (quick hidden evals every 200 steps) to
# give partial bases. Only the small model has a stage 1: the larger one is grown from the small one's stage 2.
# (Trained from scratch with a similar budget, a deeper model ended below the small one, 900 steps: calc_chain
# 0.145, ledger 0.515 at t1: depth slows early learning. Grown from the small one, it starts from its skill.)
DEFAULTS: dict[str, TrainSettings] = {
    "tiny-0.6b": TrainSettings(steps=1200, batch=16, lr=3e-3, warmup=20, noise=0.4, family_noise=FAMILY_NOISE),
}
# Stage 2: every family, continuing from the stage-1 model. Stage 1 (above) planted skill on three
# chain families; triage, the replica's held-out family, had a base of 0.000 and the other two the same.
# Its traces carry notes that make the time comparison one step at a time (thoughts._triage); its
# weight is the largest since it starts from nothing; calc_chain and ledger keep a share so that their
# stage-1 skill stays. dispatch and multi_hop have no notes (their bases may stay near 0). No mistakes
# planted in the new families: they are far from saturating.
STAGE2_WEIGHTS: dict[str, float] = {
    "calc_chain": 2.0,
    "ledger": 2.0,
    "string_pipeline": 1.0,
    "triage": 4.0,
    "dispatch": 0.5,
    "multi_hop": 0.5,
}
STAGE2_NOISE: dict[str, float] = {**FAMILY_NOISE, "triage": 0.0, "dispatch": 0.0, "multi_hop": 0.0}
STAGE2: dict[str, TrainSettings] = {
    "tiny-0.6b": TrainSettings(
        steps=400,
        batch=16,
        lr=2e-3,
        warmup=20,
        noise=0.0,
        family_noise=STAGE2_NOISE,
        copy_steps=0,
        data_offset=2,
        family_weights=STAGE2_WEIGHTS,
    ),
    # Grown from the stage-2 small model (as stage 1 grew it from the stage-1 one): it starts with the small
    # one's skill on every family, triage included, and adds to it.
    "tiny-1.7b": TrainSettings(
        steps=150,
        batch=16,
        lr=1.5e-3,
        warmup=20,
        noise=0.0,
        family_noise=STAGE2_NOISE,
        copy_steps=0,
        grow_from="tiny-0.6b",
        data_offset=3,
        family_weights=STAGE2_WEIGHTS,
    ),
}
TOOL_SHUFFLE = 0.25  # share of traces whose tool list is shuffled, so the order a server sends does not matter
# Stage 1's checkpoints, committed: stage 2 starts from them. Rebuilding stage 1 (--from-scratch) gives
# another tokenizer than theirs, because the families' generated texts changed after they were made.
STAGE1_DIR = FIXTURE_DIR / "stage1"


def _conversations(
    names: Sequence[str],
    seed: int,
    noise: float,
    family_noise: Mapping[str, float] | None = None,
    *,
    weights: Mapping[str, float] | None = None,
    note_families: Collection[str] | None = None,
) -> Iterator[tuple[list[dict[str, Any]], list[Any]]]:
    """Endless (messages, tools) from the train split, families drawn uniformly (or by ``weights``), seeded."""
    rng = random.Random(seed)
    fams = [get_family(n) for n in names]
    schemas = {f.name: f.tool_schemas() for f in fams}
    rates = dict(family_noise or {})
    counter = 0
    while True:
        fam = rng.choices(fams, [weights[f.name] for f in fams])[0] if weights else rng.choice(fams)
        task = fam.generate("train", seed * 1_000_003 + counter)
        counter += 1
        messages = trace_messages(fam, task, rng, rates.get(fam.name, noise), note_families)
        tools = list(schemas[fam.name])
        if rng.random() < TOOL_SHUFFLE:
            rng.shuffle(tools)
        yield messages, tools


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
        # The notes of stage 1's families only: the tokenizer stays the one the stage-1 models know.
        stream = _conversations([name], seed + 7919, noise=0.4, note_families=TOKENIZER_NOTE_FAMILIES)
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
    model: Qwen3ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    settings: TrainSettings,
    seed: int,
    families: Sequence[str],
) -> None:
    """Stage 0: form the copying circuit on synthetic repeated segments of ordinary (non-control) tokens."""
    if settings.copy_steps <= 0:
        return
    rng = random.Random(seed + 1)
    controls = {tokenizer.convert_tokens_to_ids(t) for t in (*SPECIAL_TOKENS, *TEXT_TOKENS)}
    counts: Counter[int] = Counter()
    stream = _conversations(families, seed + 2, settings.noise)
    for _ in range(64):
        counts.update(encode_conversation(tokenizer, *next(stream))[0])
    pool = [i for i, _ in counts.most_common() if i not in controls][: settings.copy_pool]
    opt = torch.optim.AdamW(model.parameters(), lr=settings.copy_lr, betas=(0.9, 0.95), weight_decay=0.01)
    pad = int(tokenizer.pad_token_id or 0)
    model.train()
    for step in range(settings.copy_steps):
        for group in opt.param_groups:
            group["lr"] = settings.copy_lr * min(1.0, (step + 1) / settings.warmup)
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
    init: Qwen3ForCausalLM | None = None,
    grow: bool = True,
) -> tuple[Checkpoint, list[dict[str, Any]]]:
    """SFT one model from a seeded init (or ``init``: grown to ``spec``, or a copy of it trained further
    when ``grow`` is False); returns it and the training log."""
    if init is None:
        model = build_model(spec, tokenizer, seed)
    else:
        model = grow_model(init, spec, seed) if grow else copy.deepcopy(init)
    ckpt = Checkpoint(spec.name, model, tokenizer)
    pad = int(tokenizer.pad_token_id or 0)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.95), weight_decay=0.01)
    _copy_warmup(model, tokenizer, settings, seed, families)
    data_seed = seed + settings.data_offset
    stream = _conversations(
        families, data_seed, settings.noise, settings.family_noise, weights=settings.family_weights or None
    )
    batches = _batches(tokenizer, stream, settings.batch, data_seed)
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
        if (step + 1) % (10 if eval_every else 100) == 0 or "eval" in entry:
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
    parser.add_argument("--steps", type=int, default=None, help="override stage 2's step count")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--noise", type=float, default=None)
    parser.add_argument("--families", default=",".join(STAGE2_WEIGHTS), help="stage 2's families")
    parser.add_argument("--stage1", type=Path, default=STAGE1_DIR, help="the stage-1 checkpoints (and their tokenizer)")
    parser.add_argument("--from-scratch", action="store_true", help="train the tokenizer and stage 1 too")
    parser.add_argument("--no-score", action="store_true", help="skip the hidden-eval scores (timing runs)")
    parser.add_argument("--eval-every", type=int, default=0, help="quick hidden evals while training (tuning)")
    parser.add_argument("--snapshots", type=Path, default=None, help="save a checkpoint at every quick eval")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--readme-only", action="store_true", help="rewrite README.md from the saved meta.json")
    parser.add_argument(
        "--rescore", action="store_true", help="rescore the saved checkpoints under the current eval key (no training)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.readme_only:
        write_readme(args.out)
        return 0
    if args.rescore:
        for name in args.models.split(","):
            ckpt = load_checkpoint(args.out / name)
            rescored = dict(ckpt.meta)
            rescored["base_scores"] = _base_scores(ckpt, args.seed)
            rescored["score_settings"] = _score_settings(args.seed)
            (args.out / name / "meta.json").write_text(json.dumps(rescored, indent=2, sort_keys=True) + "\n")
        write_readme(args.out)
        return 0
    command = "python -m adapters.tiny.pretrain " + " ".join(sys.argv[1:] if argv is None else argv)
    started = time.process_time()
    if args.from_scratch:
        tokenizer = build_tokenizer(args.seed)
    else:  # the stage-1 models' own tokenizer (the families' texts have changed since it was trained)
        tokenizer = load_checkpoint(args.stage1 / "tiny-0.6b").tokenizer
    metas: list[dict[str, Any]] = []
    log.info("tiny.pretrain.tokenizer", vocab=len(tokenizer), cpu_s=round(time.process_time() - started, 1))
    stage1: dict[str, tuple[Checkpoint, dict[str, Any]]] = {}
    trained: dict[str, Checkpoint] = {}

    def stage_one(name: str) -> tuple[Checkpoint, dict[str, Any]]:
        """The stage-1 model (three chain families) and its record: trained here, or loaded from --stage1."""
        if name in stage1:
            return stage1[name]
        settings = DEFAULTS[name]
        if not args.from_scratch:  # the committed stage 1 (see STAGE1_DIR)
            ckpt = load_checkpoint(args.stage1 / name)
            if ckpt.tokenizer.get_vocab() != tokenizer.get_vocab():
                parser.error(f"{args.stage1 / name} was built with another tokenizer (seed?)")
            old = ckpt.meta.get("stage1", ckpt.meta)
            record = {"train": old["train"], "final_loss": old["final_loss"], "train_cpu_s": old["train_cpu_s"]}
        else:
            t0 = time.process_time()
            ckpt, history = sft_model(MODEL_SPECS[name], tokenizer, settings, args.seed)
            record = {
                "train": settings.as_dict(),
                "final_loss": history[-1]["loss"] if history else None,
                "train_cpu_s": round(time.process_time() - t0, 1),
            }
        record["sft_families"] = list(SFT_FAMILIES)
        stage1[name] = (ckpt, record)
        return stage1[name]

    for name in args.models.split(","):
        spec = MODEL_SPECS[name]
        base = STAGE2[name]
        overrides = {"steps": args.steps, "batch": args.batch, "lr": args.lr}
        settings = msgspec.structs.replace(base, **{k: v for k, v in overrides.items() if v is not None})
        if args.noise is not None:  # one rate for every family
            settings = msgspec.structs.replace(settings, noise=args.noise, family_noise={})
        families = tuple(args.families.split(","))
        unknown = [f for f in families if f not in FAMILIES]
        if unknown:
            parser.error(f"--families: unknown {', '.join(unknown)}")
        weights = {f: settings.family_weights.get(f, 1.0) for f in families}
        settings = msgspec.structs.replace(settings, family_weights=weights)
        trained_from: dict[str, Any]
        if settings.grow_from is None:
            first, record = stage_one(name)
            init, grow, trained_from = first.model, False, {"stage1": record}
        else:  # the parent's stage-2 model: trained above, or built by an earlier invocation (same weights)
            parent = trained.get(settings.grow_from)
            if parent is None:
                try:
                    parent = load_checkpoint(args.out / settings.grow_from)
                except FileNotFoundError:
                    parser.error(f"{name} grows from {settings.grow_from}: build it first (--models with both)")
            if parent.tokenizer.get_vocab() != tokenizer.get_vocab():
                parser.error(f"{settings.grow_from} in {args.out} was built with another tokenizer")
            init, grow, trained_from = parent.model, True, {"grown_from": settings.grow_from}
        t0 = time.process_time()
        ckpt, history = sft_model(
            spec,
            tokenizer,
            settings,
            args.seed,
            families=families,
            eval_every=args.eval_every,
            snapshot_dir=args.snapshots,
            init=init,
            grow=grow,
        )
        trained[name] = ckpt
        train_s = time.process_time() - t0
        scores = {} if args.no_score else _base_scores(ckpt, args.seed)
        log.info("tiny.pretrain.scores", model=name, train_cpu_s=round(train_s, 1), **scores)
        meta: dict[str, Any] = {
            "name": name,
            "stands_in_for": spec.stands_in_for,
            "parameters": ckpt.num_parameters(),
            "seed": args.seed,
            "command": command,
            "sft_families": list(families),
            **trained_from,
            "train": settings.as_dict(),
            "final_loss": history[-1]["loss"] if history else None,
            "train_cpu_s": round(train_s, 1),
            "base_scores": scores,
            "score_settings": _score_settings(args.seed),
            "versions": {"torch": torch.__version__},
        }
        metas.append(meta)
        if not args.no_save:
            save_checkpoint(ckpt, args.out / name, meta)
    if not args.no_save:
        write_readme(args.out)
    log.info("tiny.pretrain.done", cpu_s=round(time.process_time() - started, 1))
    return 0


def _base_scores(ckpt: Checkpoint, seed: int) -> dict[str, dict[str, float]]:
    scores = {}
    for fam in FAMILIES:
        report = score_hidden(ckpt, fam, temperature=EVAL_TEMPERATURE, seed=seed)
        greedy = score_hidden(ckpt, fam, temperature=0.0, seed=seed)
        scores[fam] = {"t1": report.score, "greedy": greedy.score, "answered_t1": report.answered}
    return scores


def _score_settings(seed: int) -> dict[str, Any]:
    # The hidden sets come from the installation key: scores are only comparable under the same one.
    return {
        "split": "hidden",
        "eval_key_fingerprint": current_key().fingerprint,
        "temperature_t1": EVAL_TEMPERATURE,
        "top_p": 1.0,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "seed": seed,
    }


if __name__ == "__main__":
    raise SystemExit(main())
