"""adapters.prime_rl.procgroup: whole process groups end, including children that ignore SIGTERM."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from adapters.prime_rl.procgroup import GroupProcess, group_alive, run_to_end, tail_text

SPAWNER = """
import signal, subprocess, sys, time
if "{ignore}" == "yes":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
STUBBORN = "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\nwhile True: time.sleep(0.1)"
child = subprocess.Popen([sys.executable, "-c", STUBBORN])
print("spawned", child.pid, flush=True)
time.sleep({sleep})
"""


async def test_timeout_kills_leader_and_children_even_if_they_ignore_sigterm(tmp_path: Path) -> None:
    started = time.monotonic()
    res = await run_to_end(
        [sys.executable, "-c", SPAWNER.format(ignore="yes", sleep=60)],
        cwd=tmp_path,
        env={},
        log_path=tmp_path / "out.log",
        timeout_s=1.0,
        grace_s=0.5,
    )
    assert res.timed_out and res.returncode == -9
    assert time.monotonic() - started < 10
    pid = int(tail_text(tmp_path / "out.log").split()[1])
    assert not group_alive(pid)  # the child (in the same group) is gone too


async def test_a_child_left_behind_after_a_normal_exit_is_reaped(tmp_path: Path) -> None:
    proc = await GroupProcess.start(
        [sys.executable, "-c", SPAWNER.format(ignore="no", sleep=0)], cwd=tmp_path, env={}, log_path=tmp_path / "l"
    )
    assert await proc.wait(30) == 0
    assert group_alive(proc.pgid)  # the child still runs in the group
    assert await proc.reap_stragglers(grace_s=0.3)
    assert not group_alive(proc.pgid)
    assert not await proc.reap_stragglers(grace_s=0.3)


async def test_output_goes_to_the_log_and_exit_codes_come_back(tmp_path: Path) -> None:
    res = await run_to_end(
        [sys.executable, "-c", "import sys; print('hello'); sys.exit(3)"],
        cwd=tmp_path,
        env={},
        log_path=tmp_path / "sub" / "x.log",
        timeout_s=30,
    )
    assert (res.returncode, res.timed_out) == (3, False)
    assert tail_text(res.log_path) == "hello\n"
    assert tail_text(tmp_path / "missing") == ""
