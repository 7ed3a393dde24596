"""Red team, CPU trainer routes: the agent's env code runs in the training child and attacks from there.

The env is the reference env plus :mod:`.attack`'s prelude (so that it still trains), which tries every route
of the probe's red team at import time in the training process, plus the trainer's own: the hidden set with
the seal in place, patching the hidden scorer, writing into the base checkpoint the scorer loads and into the
trainer's directory, and a ``setsid`` daemon that ignores SIGTERM and writes into the directory the trainer
reads once training has exited. Each route test first asserts that the control run (the same code with no
sandbox, see ``conftest.hostile``) reached the target, then that the training child did not; and the
recorded post score must equal an honest re-scoring of the weights training produced. One job per path,
shared by the module's tests: every test runs on both of the training child's paths, ``cold`` (a bubblewrap
sandbox and interpreter per job) and ``warm`` (a confined fork of the training zygote, which imported the
training stack once; one zygote for the module, its spool the jobs' work directory). Two routes aim at what
the warm path adds: another job's directory in the spool (a decoy planted there, readable from the engine)
and the child's own credentials (``/proc/self/status``: no-new-privs, no capabilities, not root).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.sandbox import detect_isolation
from handlers.ports.inner_trainer import JobBundle, JobResult, Progress

from .attack import ROUTES, Host, Seen, attack_code, contained, new_tag, parse, reached
from .conftest import Hostile

# find_spec, not importorskip: collection must not import verifiers (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_ENV = ROOT / "fixtures" / "envs" / "family_reference"
EVAL_LIMIT = 4

TRAINER_ROUTES = """
def _status():
    with open("/proc/self/status") as f:
        got = dict(line.split(":", 1) for line in f if ":" in line)
    return "|".join(f"{k}={got[k].split()[0]}" for k in ("Uid", "CapEff", "NoNewPrivs"))


def _other_job():
    for path in (__DECOY__, "/sandbox/spool/" + __DECOY_REL__):
        try:
            return open(path).read()
        except OSError:
            pass
    try:
        return "unreadable: " + repr(_os.listdir("/sandbox/spool"))
    except OSError as e:
        return "unreadable: " + type(e).__name__


def _hidden_sealed():
    fam = _il.import_module("fam" + "ilies")
    return fam.hidden_tasks(fam.get_family("calc_chain"))[0].prompt


def _patch_scorer():
    scorer = _il.import_module("adapters.tiny.scorer")
    scorer.score_hidden = lambda *a, **k: type("R", (), {"score": 1.0})()
    return "patched"


_req = _j.load(open(_sys.argv[-1]))
_try("hidden_sealed", _hidden_sealed)
_try("patch_scorer", _patch_scorer)
_try("write_base", lambda: open(_os.path.join(_req["checkpoint"], "model.safetensors"), "ab").close())
_try("write_trainer_dir", lambda: open(_os.path.join(_os.path.dirname(_req["out_dir"]), "child.log"), "a").close())
_try("status", _status)
_try("other_job", _other_job)
"""
DECOY = "ait-cpu-job-decoy/out/report.json"  # another job's directory in the work dir (the warm path's spool)
DECOY_TEXT = "another job's output"
PATHS = ("cold", "warm")


def attack_bundle(tmp: Path, host: Host, tag: str, decoy: Path) -> JobBundle:
    env = tmp / "env" / "family_reference"
    shutil.copytree(REFERENCE_ENV, env)
    routes = TRAINER_ROUTES.replace("__DECOY__", repr(str(decoy))).replace("__DECOY_REL__", repr(DECOY))
    code = attack_code(host.targets(tag, daemon_to_out=True), finish="print", extra=routes)
    init = env / "__init__.py"
    init.write_text(init.read_text() + "\n\n# --- the attacker's prelude ---\n" + code)
    table = {"model": "tiny-0.6b", "learning_rate": 1e-5, "max_steps": 2, "batch_size": 4, "group_size": 2}
    lines = ["[prime_rl]", *(f"{k} = {json.dumps(v)}" for k, v in table.items()), "max_tokens = 16"]
    lines += ["", "[env]", 'id = "family-reference"', 'path = "env/family_reference"', "num_tasks = 8"]
    (tmp / "job.toml").write_text("\n".join(lines) + "\n")
    return JobBundle(job_id="redteam-cpu", family="calc_chain", root=str(tmp))


async def noop(p: Progress) -> None:
    return None


@dataclass
class CpuAttack:
    path: str
    result: JobResult
    job: Path  # the job's directory (in the work dir)
    seen: Seen
    late_writes: list[Path]
    zygote_pid: int | None  # the warm path's zygote after the job (None on the cold path)


@pytest.fixture(scope="module")
def works(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Each path's work directory, shared by the module's jobs: on the warm path, the one zygote's spool."""
    from adapters.cpu_trainer import close_zygotes

    root = tmp_path_factory.mktemp("redteam-cpu-work")
    yield {path: root / path for path in PATHS}
    close_zygotes()


def trainer(path: str, work: Path, **kwargs: object) -> Any:
    from adapters.cpu_trainer import CpuTrainer

    return CpuTrainer(work_root=work, child_path=path, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=PATHS)
def cpu_attack(
    request: pytest.FixtureRequest, hostile: Hostile, works: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CpuAttack]:
    from adapters.cpu_trainer import zygote_for

    path = str(request.param)
    host, tag = hostile.host, new_tag(f"cpu-{path}")
    tmp = tmp_path_factory.mktemp(f"redteam-cpu-{path}")
    work = works[path]
    decoy = work / DECOY
    decoy.parent.mkdir(parents=True)
    decoy.write_text(DECOY_TEXT)
    decoy.parent.parent.chmod(0o755)
    jobs_before = set(work.glob("ait-cpu-job-*"))
    before = len(host.connections)
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = host.targets(tag)["secret"]  # the engine holds an API key
    try:
        job = trainer(path, work, eval_limit=EVAL_LIMIT)
        result = asyncio.run(job.run(attack_bundle(tmp, host, tag, decoy), noop))
    finally:
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved
    time.sleep(2.0)  # the daemon would have written by now
    (job_dir,) = set(work.glob("ait-cpu-job-*")) - jobs_before - {decoy.parent.parent}
    got = parse((job_dir / "child.log").read_text())
    seen = Seen(got, host.written(tag), len(host.connections) - before, host.targets(tag))
    zygote = zygote_for(detect_isolation(), work, threads=1).pid() if path == "warm" else None
    yield CpuAttack(path, result, job_dir, seen, list(job_dir.glob("out/late_write")), zygote)
    host.cleanup(tag)


@pytest.fixture(scope="module")
def hidden_prompt() -> str:
    from families import get_family, hidden_tasks

    return hidden_tasks(get_family("calc_chain"))[0].prompt


@pytest.mark.parametrize("route", ROUTES)
def test_route_is_reachable_without_the_sandbox_and_stopped_in_the_training_child(
    route: str, hostile: Hostile, cpu_attack: CpuAttack, hidden_prompt: str
) -> None:
    from adapters.cpu_trainer import ChildLimits

    assert reached(route, hostile.control, hidden_prompt), (route, hostile.control.got[route])
    seen = cpu_attack.seen
    assert contained(route, seen, hidden_prompt, nproc=ChildLimits().nproc), (route, seen.got[route], seen.written)


def test_the_job_trains_under_bubblewrap_as_an_unprivileged_uid(cpu_attack: CpuAttack) -> None:
    result = cpu_attack.result
    assert result.ok, result.detail
    assert result.isolation == "bwrap" and detect_isolation().confined
    line = next(part for part in result.detail.split("; ") if part.startswith("training isolation:"))
    assert line.startswith("training isolation: bwrap, uid "), line
    assert "weaker" not in line and "UNSAFE" not in line and "nproc=128" in line, line
    assert f", {cpu_attack.path} path (" in line and "unavailable" not in line, line  # the path asked for ran
    if os.geteuid() == 0:
        assert "uid 0," not in line and "engine's uid" not in line
    uid = line.removeprefix("training isolation: bwrap, uid ").split(",")[0]
    status = cpu_attack.seen.got["status"]  # as the env's code saw itself: no-new-privs, no capabilities
    assert status == f"OK:'Uid={uid}|CapEff=0000000000000000|NoNewPrivs=1'", status


def test_another_jobs_directory_is_out_of_reach(cpu_attack: CpuAttack) -> None:
    decoy = cpu_attack.job.parent / DECOY
    assert decoy.read_text() == DECOY_TEXT  # the target is there (and readable outside the sandbox)
    got = cpu_attack.seen.got["other_job"]
    assert DECOY_TEXT not in got and got.startswith("OK:'unreadable: "), got
    assert "ait-cpu-job" not in got, got  # the warm child's spool is an empty tmpfs, the cold child has none


def test_trainer_routes_are_stopped(cpu_attack: CpuAttack) -> None:
    got = cpu_attack.seen.got
    assert got["hidden_sealed"].startswith("ERR:EvalKeySealed"), got["hidden_sealed"]
    assert got["patch_scorer"] == "OK:'patched'"  # its own process only: the scorer runs elsewhere
    for route in ("write_base", "write_trainer_dir"):
        assert got[route].startswith("ERR:"), (route, got[route])


def test_no_late_write_and_the_post_score_is_an_honest_rescoring(cpu_attack: CpuAttack) -> None:
    assert not cpu_attack.late_writes  # the setsid daemon was killed before scoring
    assert cpu_attack.result.post is not None and cpu_attack.result.post == rescored(cpu_attack.job)


def rescored(job: Path) -> float:
    """The trained weights scored here, independently, at the job's settings."""
    from safetensors.torch import load_model

    from adapters.tiny.model import load_checkpoint
    from adapters.tiny.scorer import score_hidden

    weights = job / "out" / "model.safetensors"
    ckpt = load_checkpoint("tiny-0.6b")
    load_model(ckpt.model, str(weights), strict=True)
    ckpt.model.train(False)
    return score_hidden(ckpt, "calc_chain", temperature=1.0, seed=0, limit=EVAL_LIMIT).score


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
async def test_an_endless_loop_in_the_env_is_killed_at_the_deadline(
    path: str, tmp_path: Path, works: dict[str, Path]
) -> None:
    """The endless-loop route: the training child spins at import; the job's deadline (plus the grace) ends it.
    On the warm path the kill goes through the zygote, which survives it and serves the next job."""
    from adapters.cpu_trainer import zygote_for

    job = tmp_path / "job"
    env = job / "env" / "family_reference"
    shutil.copytree(REFERENCE_ENV, env)
    init = env / "__init__.py"
    prelude = "while True:  # the attacker's prelude: never returns\n    pass\n"
    head, future, rest = init.read_text().partition("from __future__ import annotations\n")
    init.write_text(head + future + prelude + rest if future else prelude + head)
    table = {"model": "tiny-0.6b", "learning_rate": 1e-5, "max_steps": 2, "batch_size": 4, "group_size": 2}
    lines = ["[prime_rl]", *(f"{k} = {json.dumps(v)}" for k, v in table.items()), "max_tokens = 16"]
    lines += ["", "[env]", 'id = "family-reference"', 'path = "env/family_reference"', "num_tasks = 8"]
    (job / "job.toml").write_text("\n".join(lines) + "\n")
    spec = json.loads((ROOT / "examples" / "tasks" / "calc_chain_v1_fast.json").read_text())
    spec["bounds"]["time_budget_s"] = 20
    (job / "task_spec.json").write_text(json.dumps(spec))
    work = works[path]
    fresh = path == "warm" and not _zygote_up(work)  # the module's first warm job starts the zygote
    started = time.monotonic()
    loop = trainer(path, work, eval_limit=1, kill_grace_s=1.0)
    result = await loop.run(JobBundle(job_id="loop", family="calc_chain", root=str(job)), noop)
    assert not result.ok and result.failure == "timeout", (result.failure, result.detail)
    assert time.monotonic() - started < 40 + (120 if fresh else 0)
    assert result.isolation == "bwrap" and "past its deadline and was killed" in result.detail
    if path == "warm":
        zygote = zygote_for(detect_isolation(), work, threads=1)
        assert zygote.pid() is not None  # it outlived the killed child
        await zygote.ensure()  # and still answers


def _zygote_up(work: Path) -> bool:
    from adapters.cpu_trainer import zygote_for

    return zygote_for(detect_isolation(), work, threads=1).pid() is not None
