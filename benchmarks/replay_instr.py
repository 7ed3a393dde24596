"""Instructions executed by ``ait replay``, counted by valgrind (cachegrind): a figure the machine's load does not move.

On a shared machine the CPU seconds of benchmarks/log_bench.py move by +-25% between runs, more than a change to
the fold moves them. The instructions a run executes do not depend on the neighbours, so two checkouts can be
compared exactly (what they leave out: cache misses, which the fold's growing state does incur):

    .venv/bin/python benchmarks/replay_instr.py [--events 100000] [--before-root DIR]

Each figure is the instructions of a fresh process that does the step on a log of ``--events`` events (the
log_bench stream) minus those of the same process on a 100-event log (interpreter start and imports): the raw
floor (``msgspec.json.decode`` of every line, untyped), the checked scan alone, and ``engine.replay.replay``
with the default projections (what ``ait replay`` runs). Needs ``valgrind`` on the PATH.

``--lifecycle`` writes the log with each job assigned to a pod before it starts (``log_bench.lifecycle_body``): in
the issue's stream no job is assigned, and the queue folds starts and progress as anomalies, its cheapest branch.

``--parts`` also counts each part of a replay alone: the checked scan's (typed decode, the crc check's split and
CRC-32s, the whole ``decode_block``), each projection's fold, and the state hash at the end. ``--stores`` counts
only what one attribute read and one write cost on a msgspec Struct (what the projections' states are made of) and
on a ``__slots__`` class.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.log_bench import body as bench_body
from benchmarks.log_bench import lifecycle_body, write_replay_file
from handlers.registry import default_projections

PRELUDE = (
    "import sys; from pathlib import Path; import msgspec, engine.log, engine.replay; "
    "from handlers.registry import default_projections; p = Path(sys.argv[1])\n"
)
_VALGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")
FLOOR = "raw msgspec.json.decode per line (floor)"
REPLAY = "ait replay (engine.replay.replay, default projections)"
STEPS = {
    FLOOR: "d = msgspec.json.decode\nfor line in p.read_bytes().splitlines(): d(line)",
    "scan_log alone (crc, typed decode, seq)": "for b in engine.log.scan_log(p): pass",
    REPLAY: "engine.replay.replay(p, default_projections())",
}


def instructions(code: str, log: Path, root: Path) -> int:
    """Instructions (cachegrind's ``I refs``) of a fresh ``python -c code log`` running checkout ``root``."""
    out = subprocess.run(
        [*_VALGRIND, sys.executable, "-c", PRELUDE + code, str(log)],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    ).stderr
    m = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output: {out[-500:]}")
    return int(m.group(1).replace(",", ""))


# --stores: what one attribute read and one attribute write cost on the kinds of object a fold's state is made of.
_ATTR_PRE = """
import msgspec
class Struct(msgspec.Struct, kw_only=True):  # what the projections' states are (JobEntry, QueueState, ...)
    status: str = "queued"
class Slots:  # a plain class with __slots__
    __slots__ = ("status",)
    def __init__(self) -> None:
        self.status = "queued"
o = {kind}()
def run(o, n):
    for _ in range(n):
"""
_ATTR_BODY = {"base": "pass", "read": "x = o.status", "write": "o.status = 'running'"}


def attribute_costs(n: int = 1_000_000) -> None:
    """Instructions per attribute read and write, a msgspec Struct against a class with __slots__: CPython 3.11
    specializes both on the plain class, only the read on a Struct (its own ``__setattr__`` keeps a write generic)."""
    print(f"instructions per attribute access ({n:,} in a loop, the empty loop subtracted), valgrind cachegrind")
    for kind in ("Struct", "Slots"):
        cost = {}
        for step, body in _ATTR_BODY.items():
            code = _ATTR_PRE.format(kind=kind) + f"        {body}\nrun(o, {n})\n"
            out = subprocess.run(
                [*_VALGRIND, sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stderr
            m = re.search(r"I\s+refs:\s+([\d,]+)", out)
            assert m is not None, out[-500:]
            cost[step] = int(m.group(1).replace(",", ""))
        read, write = ((cost[k] - cost["base"]) / n for k in ("read", "write"))
        print(f"  {kind:8s} read {read:6.0f}   write {write:6.0f}")


# --parts: each part of a replay alone (the scan's parts on the same 64 KiB blocks as scan_log; each projection's
# fold on blocks decoded beforehand, through engine.folder.Folder), less its setup (or the empty fold).
_SCAN_SETUP = """
import gc, zlib
from itertools import repeat
from events.codec import _HEAD, _slice, _typed_decoder, RecordCodec
data = p.read_bytes(); dec = _typed_decoder(); codec = RecordCodec(); mv = memoryview(data)
blocks = []; pos = 0; end = data.rfind(b"\\n") + 1
while pos < end:
    stop = data.rfind(b"\\n", pos, pos + engine.log._BLOCK) + 1; blocks.append((pos, stop)); pos = stop
gc.disable()
"""
_SCAN_PARTS = {
    "(setup)": "pass",
    "typed decode of each block (decode_lines)": "for s, e in blocks: dec.decode_lines(mv[s:e])",
    "crc check: split each block into lines": "for s, e in blocks: data[s : e - 1].split(b'\\n')",
    "crc check: + the CRC-32 of each line's head": "for s, e in blocks: "
    "list(map(zlib.crc32, map(_slice, data[s : e - 1].split(b'\\n'), repeat(_HEAD))))",
    "decode_block (decode, the whole crc check, seq)": "seq = 0\nfor s, e in blocks:\n"
    "    seq += len(codec.decode_block(data, e, first_seq=seq, start=s, records=False))",
}
_FOLD_SETUP = """
import gc
from engine.effects import EffectsProjection
from engine.folder import Folder
blocks = list(engine.log.scan_log(p, records=False))
every = {{q.name: q for q in [*default_projections(), EffectsProjection()]}}
projs = {which}
states = [q.initial() for q in projs]; folder = Folder(projs)
gc.disable()
for b in blocks: folder.fold(b, states)
"""


# The state hash at the end of a replay: the replay, less the same replay with the hash left out.
_NO_HASH = "engine.replay.state_hash = lambda projections, states: ''\n" + STEPS[REPLAY]


def parts(big: Path, small: Path, root: Path, events: int, replay: float) -> None:
    """Instructions per event of each part of a replay, alone (the valgrind runs in parallel, one per CPU: an
    instruction count does not depend on the neighbours); ``replay``: the whole replay's, per event."""
    names = [q.name for q in default_projections()] + ["effects"]
    folds = {name: f"[every[{name!r}]]" for name in names} | {"all": "list(every.values())", "(empty)": "[]"}
    codes = {f"scan {k}": _SCAN_SETUP + code for k, code in _SCAN_PARTS.items()}
    codes |= {f"fold {k}": _FOLD_SETUP.format(which=which) for k, which in folds.items()}
    codes["no hash"] = _NO_HASH
    runs = [(key, log) for key in codes for log in (big, small)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(runs, pool.map(lambda run: instructions(codes[run[0]], run[1], root), runs), strict=True))
    per = {key: (counts[key, big] - counts[key, small]) / events for key in codes}
    print("  the checked scan's parts (their setup subtracted):")
    for k in _SCAN_PARTS:
        if k != "(setup)":
            print(f"    {k:52s} {per[f'scan {k}'] - per['scan (setup)']:8,.0f}")
    print("  the fold, each projection alone (the empty fold subtracted):")
    for k in folds:
        if k != "(empty)":
            print(f"    {k:52s} {per[f'fold {k}'] - per['fold (empty)']:8,.0f}")
    # sha256 over the canonical encoding of every state: it grows with the run (every job ever queued is in it)
    print(f"  the state hash at the end (the replay less one without it) {replay - per['no hash']:8,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--before-root", type=Path, default=None, help="a checkout of the code before a change")
    ap.add_argument("--stores", action="store_true", help="only: attribute read/write cost, Struct vs __slots__")
    ap.add_argument("--parts", action="store_true", help="also: each part of the scan and each projection's fold")
    ap.add_argument(
        "--lifecycle",
        action="store_true",
        help="each job assigned before it starts (log_bench.lifecycle_body), not the issue's stream",
    )
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("replay_instr: valgrind is not on the PATH")
    if args.stores:
        attribute_costs()
        return
    here = Path(__file__).resolve().parents[1]
    roots = {"this checkout": here} | ({"--before-root": args.before_root.resolve()} if args.before_root else {})
    tmp = Path(tempfile.mkdtemp(prefix="replay-instr-"))
    try:
        big, small = tmp / "big.jsonl", tmp / "small.jsonl"
        stream = lifecycle_body if args.lifecycle else bench_body
        write_replay_file(big, args.events, stream)
        write_replay_file(small, 100, stream)
        kind = "lifecycle stream" if args.lifecycle else "log_bench stream"
        print(f"instructions per event, {args.events:,}-event log, {kind} (imports subtracted), valgrind cachegrind")
        replays: dict[str, float] = {}
        for which, root in roots.items():
            per = {}
            for name, code in STEPS.items():
                per[name] = (instructions(code, big, root) - instructions(code, small, root)) / args.events
                print(f"  {which:14s} {name:56s} {per[name]:8,.0f}")
            floor, replay = per[FLOOR], per[REPLAY]
            replays[which] = replay
            print(f"  {which:14s} floor / ait replay (instructions): {floor / replay:.3f}  (target's ratio >= 0.6)")
        if args.parts:
            for which, root in roots.items():
                print(f"  {which}:")
                parts(big, small, root, args.events, replays[which])
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
