"""Red team, pod routes: a process that outlives training, and files planted where scoring later reads.

The runner (``adapters.prime_rl.runner``) trains in its own process group, kills the whole group (and any
straggler the launcher left) before it even asks for the hidden eval package, and builds that package fresh,
replacing whatever is at its path. These tests play the agent's side against those two mechanisms directly;
the runner-level test with the prime-rl stand-ins is
``tests/adapters/prime_rl/test_runner.py::test_a_process_left_behind_by_training_is_killed_before_scoring``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from adapters.prime_rl.procgroup import GroupProcess, group_alive
from families import get_family, hidden_tasks
from families.eval_env import build_eval_package

# "Training" whose env code forks a helper that ignores SIGTERM, waits until scoring would have started,
# then tampers with the scoring directory; the launcher itself exits at once, as a finished run does.
TAMPERER = """
import os, signal, sys, time
target = sys.argv[1]
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(1.5)
    with open(target, "w") as f:
        f.write("post=1.0")
    os._exit(0)
sys.exit(0)
"""


async def test_a_helper_process_left_by_training_is_killed_before_it_can_tamper(tmp_path: Path) -> None:
    score_dir = tmp_path / "score"
    score_dir.mkdir()
    target = score_dir / "post.json"
    proc = await GroupProcess.start(
        [sys.executable, "-c", TAMPERER, str(target)], cwd=tmp_path, env={}, log_path=tmp_path / "train.log"
    )
    assert await proc.wait(10) == 0  # training "finished"
    assert group_alive(proc.pgid)  # ... but left its helper behind
    assert await proc.reap_stragglers(grace_s=0.3)  # what the runner does before scoring
    assert not group_alive(proc.pgid)
    await asyncio.sleep(2.0)
    assert not target.exists()


def test_an_eval_package_planted_at_the_scoring_path_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "score" / "hidden"
    planted = out / "ait-eval-calc-chain"
    planted.mkdir(parents=True)
    (planted / "tasks.json").write_text('[{"prompt": "1+1", "answer": "2"}]')  # easy "hidden" tasks
    (planted / "planted.py").write_text("raise SystemExit")
    pkg = build_eval_package("calc_chain", out)
    root = Path(pkg.path)
    assert root == planted
    assert not (root / "planted.py").exists()
    written = "\n".join(
        p.read_text() for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".py", ".jsonl")
    )
    assert '"1+1"' not in written
    first = hidden_tasks(get_family("calc_chain"))[0]
    assert first.prompt in written  # the real, keyed hidden set


# The same helper, but it first leaves the training process group with setsid (and ignores SIGTERM): the
# group kill alone no longer reaches it; the environment marker every descendant inherits does.
SETSID_TAMPERER = """
import os, signal, sys, time
target = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(target + ".pid", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(1.5)
        with open(target, "w") as f:
            f.write("post=1.0")
        os._exit(0)
    os._exit(0)
time.sleep(0.3)
sys.exit(0)
"""


def read_pid(path: Path) -> int:
    return int(path.read_text() or 0) if path.exists() else 0


async def test_a_helper_that_left_the_process_group_with_setsid_is_killed_too(tmp_path: Path) -> None:
    from adapters.prime_rl.procgroup import marked_pids

    target = tmp_path / "score" / "post.json"
    target.parent.mkdir()
    proc = await GroupProcess.start(
        [sys.executable, "-c", SETSID_TAMPERER, str(target)], cwd=tmp_path, env={}, log_path=tmp_path / "train.log"
    )
    assert await proc.wait(10) == 0
    helper = 0
    for _ in range(100):  # the helper writes its pid as soon as it runs
        if helper := read_pid(Path(f"{target}.pid")):
            break
        await asyncio.sleep(0.05)
    assert not group_alive(proc.pgid) and helper in marked_pids(proc.mark)  # out of the group, still marked
    assert await proc.reap_stragglers(grace_s=0.3)
    assert not marked_pids(proc.mark)
    await asyncio.sleep(2.0)
    assert not target.exists()


async def test_a_pod_scores_on_the_engines_package_sent_after_training_never_on_its_own(tmp_path: Path) -> None:
    """The dispatcher answers ``eval_needed`` with the package built under the engine's key; a prime-rl runner
    made for a pod has no way to build one itself."""
    import pytest

    from adapters.prime_rl.factory import controller_only_source
    from cli.worker_wiring import eval_packages
    from events import JobSucceeded
    from families.eval_env import package_files
    from handlers.ports.inner_trainer import JobBundle
    from tests.fakes.fleet import FakeProvider
    from tests.fakes.inner import EvalScoringTrainer
    from tests.handlers.fleet.fleet_world import World, queue_jobs

    with pytest.raises(OSError, match="receives it from the controller"):
        await controller_only_source(JobBundle(job_id="j", family="calc_chain", root=str(tmp_path)))
    trainers: list[EvalScoringTrainer] = []

    def trainer() -> EvalScoringTrainer:
        trainers.append(EvalScoringTrainer(seconds=0.1))
        return trainers[-1]

    world = World(tmp_path, FakeProvider(), trainer=trainer, eval_packages=eval_packages())
    async with world.runtime() as rt:
        await queue_jobs(rt, world.blobs, 2)
        summary = await world.dispatcher(rt).run()
    assert (summary.status, summary.succeeded) == ("drained", 2)
    done = world.events(JobSucceeded)
    assert [e.post for e in done] == [0.2, 0.2]  # the 200 hidden tasks
    manifest_fp = package_files("calc_chain")[1].fingerprint  # the engine's, under the (test) installation key
    paths = [p for t in trainers for p in t.package_paths]
    assert len(paths) == 2 and all(p.is_relative_to(tmp_path / "agents") and p.parent.name == "eval" for p in paths)
    assert all(manifest_fp in (p / "ait_eval_calc_chain" / "manifest.json").read_text() for p in paths)


# A helper that leaves the group (setsid) AND re-executes itself with an empty environment: neither the group
# nor the marker can find it. Only a process tree it cannot leave can: the pod agent is its subreaper.
ESCAPER = """
import os, sys, time
target = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        code = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "open(sys.argv[1] + '.pid', 'w').write(str(os.getpid())); time.sleep(1.5); "
                "open(sys.argv[1], 'w').write('post=1.0')")
        os.execve(sys.executable, [sys.executable, "-c", code, target], {})
    os._exit(0)
time.sleep(0.3)
"""

# Runs as its own process (a pod agent stand-in), so the test process itself never becomes a subreaper.
AGENT = """
import asyncio, json, os, sys, time
from pathlib import Path
from adapters.prime_rl.procgroup import GroupProcess, adopt_orphans, marked_pids

async def main(tmp: Path, adopt: bool, escaper: str) -> None:
    if adopt:
        assert adopt_orphans()
    target = tmp / "post.json"
    proc = await GroupProcess.start([sys.executable, "-c", escaper, str(target)], cwd=tmp, env={},
                                    log_path=tmp / "train.log")
    await proc.wait(20)
    pid_file = Path(f"{target}.pid")
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    marked = bool(marked_pids(proc.mark))
    await proc.reap_stragglers(grace_s=0.0)
    for _ in range(20 if adopt else 100):  # 2 s is past its write; without adoption wait for it (control)
        await asyncio.sleep(0.1)
        if target.exists():
            break
    print(json.dumps({"marked": marked, "written": target.exists()}))

asyncio.run(main(Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]))
"""


def test_a_helper_that_scrubs_its_environment_cannot_leave_a_subreaper_agents_tree(tmp_path: Path) -> None:
    import json
    import subprocess

    outcomes = {}
    for adopt in ("1", "0"):
        run = tmp_path / adopt
        run.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", AGENT, str(run), adopt, ESCAPER], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outcomes[adopt] = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcomes["1"] == {"marked": False, "written": False}  # invisible to the marker, killed all the same
    assert outcomes["0"] == {"marked": False, "written": True}  # without the subreaper it would have escaped


# --- GPU pods: training on a uid of its own, scoring on the agent's -----------------------------------------


def _interpreter_for_any_uid() -> str:
    """The stand-ins need only the standard library: this venv's Python if any uid can run it, else the system's."""
    from adapters.sandbox import traversable

    own = Path(sys.executable).resolve()
    if traversable(own.parent) and traversable(Path(sys.prefix).resolve()):
        return sys.executable
    return "/usr/bin/python3"  # pyenv under a root-only /root (this project's machines): the system's 3.11


def _read_as(uid: int, path: Path) -> str:
    import subprocess

    code = "import sys; print(open(sys.argv[1]).read()[:20])"
    done = subprocess.run(
        ["/usr/bin/python3", "-c", code, str(path)], user=uid, group=uid, extra_groups=[], capture_output=True
    )
    return "OK" if done.returncode == 0 else done.stderr.decode().strip().splitlines()[-1]


async def test_gpu_training_runs_on_its_own_uid_which_cannot_read_the_eval_package(eval_pkg_root: Path) -> None:
    import os
    import shutil
    import tempfile

    import msgspec

    from adapters.prime_rl.runner import PrimeRLRunner
    from adapters.sandbox import fresh_uid, processes_of
    from handlers.ports.inner_trainer import JobBundle
    from tests.adapters.prime_rl.conftest import STANDINS, Recorder, SkillScorer, make_bundle, standin_settings

    assert os.geteuid() == 0, "a pod agent runs as root; so does CI"
    root = Path(tempfile.mkdtemp(prefix="ait-gpu-uid-", dir="/var/tmp"))
    os.chmod(root, 0o755)  # only the eval package's own 0700 may keep the training uid out
    try:
        uid = fresh_uid()
        site = root / "site"
        site.mkdir()
        os.chown(site, uid, uid)  # stands for prime-rl's venv, which the install writes into
        py = _interpreter_for_any_uid()
        s = standin_settings(root, mode="straggler", env={"STANDIN_SITE": str(site)})
        s = msgspec.structs.replace(
            s,
            train_uid=uid,
            install_command=(py, str(STANDINS / "uv.py"), "pip", "install", "--no-deps", "-e", "{env_dir}"),
            rl_command=(py, str(STANDINS / "rl.py")),
        )
        bundle = make_bundle(root)
        seen: dict[str, object] = {}

        async def source(job: JobBundle) -> Path:
            # The pod agent's layout: the package arrives after training, into a fresh 0700 directory.
            seen["alive"] = processes_of(uid)
            target = root / "evals" / job.job_id
            target.parent.mkdir()
            shutil.copytree(eval_pkg_root / "ait-eval-calc-chain", target / "ait-eval-calc-chain")
            for p in target.rglob("*"):  # readable inside: the directory's 0700 is the only barrier
                p.chmod(0o755 if p.is_dir() else 0o644)
            target.chmod(0o700)
            files = sorted(p for p in target.rglob("*.py") if p.is_file())
            seen["as_train_uid"] = _read_as(uid, files[0])
            seen["as_root"] = _read_as(0, files[0])
            target.chmod(0o755)  # control: without the 0700 the training uid could read it
            seen["open_as_train_uid"] = _read_as(uid, files[0])
            target.chmod(0o700)
            return target / "ait-eval-calc-chain"

        scorer = SkillScorer()
        result = await PrimeRLRunner(s, scorer=scorer, eval_source=source).run(bundle, Recorder())
        assert result.ok, result.detail
        run_files = [p for p in (Path(s.work_root) / bundle.job_id / "train").rglob("metrics.jsonl")]
        assert run_files and all(p.stat().st_uid == uid for p in run_files)  # written by training, as its uid
        assert result.metrics.get("stragglers_killed") == 1.0  # the straggler (of the uid) was killed first
        assert seen["alive"] == []  # when the package was asked for, no process of the training uid was left
        assert seen["as_root"] == "OK" and seen["open_as_train_uid"] == "OK"
        assert "PermissionError" in str(seen["as_train_uid"]), seen
        assert scorer.calls and os.geteuid() != uid  # scoring ran here, on the agent's uid
    finally:
        shutil.rmtree(root, ignore_errors=True)
