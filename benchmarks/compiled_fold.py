"""Would a compiled fold reach the replay target? ``ait replay`` from the sources against the same sources compiled.

    uv venv /tmp/cy-venv && uv pip install --python /tmp/cy-venv/bin/python cython setuptools
    .venv/bin/python benchmarks/compiled_fold.py --cython-python /tmp/cy-venv/bin/python [--events 1000000] [--repeat 5]

Issue 20 asks for ``ait replay`` at >= 0.6 of raw decoding in CPU seconds, and the passes in docs/performance.md
left "a compiled fold" as the one untried way there. This measures the cheapest one: Cython compiling the
replay's modules (the scan, the Folder, every default projection) as they are, untyped, in a copy of the
packages, with Cython taken from its own virtual environment (never a dependency of the project). Each figure
is the best of ``--repeat`` fresh processes, the three steps interleaved: the raw floor (``msgspec.json.decode``
of every line, untyped), ``engine.replay.replay`` with the default projections from the sources, and the same
from the compiled copy (imports excluded). The two replays must print the same state hash.

Compiled handlers are Cython functions, not Python ones, so ``engine.folder.reads_record`` cannot read them and the
compiled Folder sets ``current`` before every handler (the sixth pass's skipped writes are not in that figure).
``events/codec.py`` stays interpreted: Cython 3.3 compiles its strided ``bytearray`` slice assignment (the crc
check of a block) into code that raises ``TypeError`` at run time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.log_bench import write_replay_file
from benchmarks.replay_instr import FLOOR, REPLAY, STEPS
from benchmarks.replay_scale import ROOT, fresh_process

PACKAGES = ("adapters", "cli", "engine", "events", "families", "handlers", "views")
#: the modules a replay runs per record or per block (codec excepted: see the docstring)
COMPILED = (
    "engine/folder.py",
    "engine/projection.py",
    "engine/replay.py",
    "engine/log.py",
    "engine/effects.py",
    "handlers/fleet/queue.py",
    "handlers/fleet/projection.py",
    "handlers/episode/projection.py",
    "handlers/run/summary.py",
    "handlers/budget/rules.py",
)
_HASHED = "\nprint(r.state_hash, file=sys.stderr)"


def compile_copy(dest: Path, cython_python: str) -> None:
    """Copy the packages to ``dest`` and compile :data:`COMPILED` there in place (``.so`` beside each ``.py``:
    the import system prefers the extension)."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    # Cython's build step runs setuptools in the working directory; with no pyproject.toml there it builds only
    # the extensions it is given.
    subprocess.run(
        [cython_python, "-m", "Cython.Build.Cythonize", "-i", "-3", "-q", *COMPILED],
        cwd=dest,
        check=True,
        capture_output=True,
    )
    missing = [m for m in COMPILED if not list((dest / m).parent.glob(Path(m).stem + ".*.so"))]
    if missing:
        raise SystemExit(f"Cython built no extension for {missing}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cython-python", required=True, help="an interpreter with Cython and setuptools installed")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compiled-fold-"))
    try:
        compiled = tmp / "compiled"
        compile_copy(compiled, args.cython_python)
        log = tmp / "log.jsonl"
        write_replay_file(log, args.events)
        replay = f"r = {STEPS[REPLAY]}{_HASHED}"  # the same call as replay_instr.py counts, and its hash
        steps = {
            "raw decode (floor)": (STEPS[FLOOR], ROOT),
            "ait replay, sources": (replay, ROOT),
            "ait replay, compiled": (replay, compiled),
        }
        best: dict[str, float] = {}
        hashes: dict[str, str] = {}
        for _ in range(args.repeat):
            for name, (code, root) in steps.items():
                cpu, err = fresh_process(code, log, root)
                best[name] = min(best.get(name, cpu), cpu)
                if err:
                    hashes[name] = err.splitlines()[-1]
        if len(set(hashes.values())) != 1:
            raise SystemExit(f"the replays disagree: {hashes}")
        floor = best["raw decode (floor)"]
        digest = hashes.popitem()[1][:16]
        print(f"{args.events:,} events, CPU s, best of {args.repeat} fresh processes; state hash {digest}")
        for name, cpu in best.items():
            print(f"  {name:22s} {cpu:7.2f}   floor / this {floor / cpu:5.3f}")
        print(f"  compiled / sources     {best['ait replay, compiled'] / best['ait replay, sources']:7.3f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
