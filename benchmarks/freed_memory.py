"""Freed tensor memory kept in the process (adapters/freed_memory.py): CPU seconds and page faults, off and on.

A CPU inner job's work, run by the product's own code in a fresh process per side (the settings apply at a process's
start): the pre/post score (``score_hidden`` of tiny-1.7b on 64 hidden calc_chain and 64 ledger tasks) and the
training child's steps (``run_episodes`` on 16 train tasks x group 4, then ``grpo_update`` with AdamW), ``--steps``
times. ``off`` is glibc's and torch's defaults (``THP_MEM_ALLOC_ENABLE=0``, no thresholds); ``on`` calls
:func:`keep_freed_memory` first, as ``ait`` does. The sides alternate (``--reps`` each) and must agree on every
reward, sampled token and loss (a digest of them), or the script exits 1::

    .venv/bin/python benchmarks/freed_memory.py [--reps 2] [--steps 4]

Prints per run the user and system CPU seconds, minor page faults and wall time of the measured part (after
the model is loaded and warmed), then the on/off ratios of the medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _work(steps: int) -> dict[str, object]:
    import torch

    from adapters.cpu_trainer._grpo import EpisodeSample, grpo_update
    from adapters.tiny.episodes import run_episodes
    from adapters.tiny.generate import SamplingParams
    from adapters.tiny.model import load_checkpoint
    from adapters.tiny.scorer import score_hidden
    from families import SYSTEM_PROMPT, get_family

    torch.set_num_threads(1)
    ckpt = load_checkpoint("tiny-1.7b")
    score_hidden(ckpt, "calc_chain", seed=0, limit=8)  # warm-up: lazy imports, first allocations
    digest = hashlib.sha256()
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for family in ("calc_chain", "ledger"):
        report = score_hidden(ckpt, family, seed=0, limit=64)
        digest.update(json.dumps(report.rewards).encode())
    fam = get_family("calc_chain")
    optimizer = torch.optim.AdamW(ckpt.model.parameters(), lr=3e-4)
    for step in range(steps):
        tasks = [fam.generate("train", 1000 * step + i) for i in range(16) for _ in range(4)]
        ckpt.model.train(False)
        episodes = run_episodes(
            ckpt,
            fam,
            tasks,
            SamplingParams(temperature=1.0, max_tokens=64, seed=step),
            max_turns=2,
            system_prompt=SYSTEM_PROMPT,
            tools=fam.tool_schemas(),
        )
        samples = [EpisodeSample(group=i // 4, reward=e.reward, turns=e.turns) for i, e in enumerate(episodes)]
        ckpt.model.train()
        stats = grpo_update(ckpt.model, optimizer, samples, temperature=1.0)
        digest.update(json.dumps([[t.token_ids for t in e.turns] for e in episodes]).encode())
        digest.update(repr(stats.loss).encode())
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "user": after.ru_utime - before.ru_utime,
        "sys": after.ru_stime - before.ru_stime,
        "minflt": after.ru_minflt - before.ru_minflt,
        "wall": time.perf_counter() - started,
        "digest": digest.hexdigest()[:16],
    }


def _child(side: str, steps: int) -> None:
    if side == "on":
        from adapters.freed_memory import keep_freed_memory

        keep_freed_memory()
    print(json.dumps(_work(steps)))


def _run(side: str, steps: int) -> dict[str, object]:
    from adapters.freed_memory import SETTING_VARS

    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARS}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if side == "off":
        env["THP_MEM_ALLOC_ENABLE"] = "0"
    out = subprocess.run(
        [sys.executable, __file__, "--child", side, "--steps", str(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.steps)
        return 0
    runs: dict[str, list[dict[str, object]]] = {"off": [], "on": []}
    print(f"{'side':<5} {'user s':>7} {'sys s':>7} {'CPU s':>7} {'faults':>10} {'wall s':>7}  digest")
    for _ in range(args.reps):
        for side in ("off", "on"):
            r = _run(side, args.steps)
            runs[side].append(r)
            cpu = float(r["user"]) + float(r["sys"])  # type: ignore[arg-type]
            row = f"{side:<5} {r['user']:>7.2f} {r['sys']:>7.2f} {cpu:>7.2f} {r['minflt']:>10} {r['wall']:>7.2f}"
            print(f"{row}  {r['digest']}")

    def med(side: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs[side])  # type: ignore[arg-type]

    cpu_off, cpu_on = med("off", "user") + med("off", "sys"), med("on", "user") + med("on", "sys")
    print(
        f"on/off, medians: CPU-s {cpu_on:.2f}/{cpu_off:.2f} = {cpu_on / cpu_off:.2f}, "
        f"sys {med('on', 'sys') / med('off', 'sys'):.2f}, faults {med('on', 'minflt') / med('off', 'minflt'):.3f}, "
        f"wall {med('on', 'wall') / med('off', 'wall'):.2f}"
    )
    digests = {str(r["digest"]) for side in runs.values() for r in side}
    if len(digests) != 1:
        print(f"the sides disagree: digests {sorted(digests)}")
        return 1
    print(f"identical results on both sides (digest {digests.pop()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
