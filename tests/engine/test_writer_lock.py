"""The run's writer lock: a second writer is refused with the holder's pid, readers are not, death releases it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.log import EventLog, read_log
from engine.runtime import Runtime
from engine.writer_lock import LOCK_NAME, RunLocked, WriterLock, lock_holder
from events import JobQueued

REPO = Path(__file__).resolve().parents[2]


def _job(i: int) -> JobQueued:
    return JobQueued(job_id=f"j{i}", episode_id=f"e{i}", family="calc_chain", base_model="m", bundle="b")


async def test_a_second_writer_is_refused_naming_the_run_and_pid_and_the_log_is_untouched(tmp_path: Path) -> None:
    run = tmp_path / "run-a"
    async with Runtime(run, []) as rt:
        await rt.emit(_job(0))
        before = (run / "events.jsonl").read_bytes()
        assert lock_holder(run) == os.getpid()
        with pytest.raises(RunLocked) as err:
            Runtime(run, [])
        message = str(err.value)
        assert "\n" not in message and "run-a" in message and f"process {os.getpid()}" in message
        assert err.value.pid == os.getpid()
        with pytest.raises(RunLocked):
            EventLog.open(run / "events.jsonl")
        # A reader needs no lock and sees everything durable.
        assert [r.seq for r in read_log(run / "events.jsonl").records] == [0]
        assert (run / "events.jsonl").read_bytes() == before
        await rt.emit(_job(1))
    # Closed: the lock is free and the next writer carries on from the log.
    assert lock_holder(run) is None
    async with Runtime(run, []) as rt2:
        assert rt2.next_seq == 2
        await rt2.emit(_job(2))
    assert [r.seq for r in read_log(run / "events.jsonl").records] == [0, 1, 2]


def test_release_is_idempotent_and_the_lock_is_per_directory(tmp_path: Path) -> None:
    a = WriterLock.acquire(tmp_path / "a")
    b = WriterLock.acquire(tmp_path / "b")  # another run: independent
    with pytest.raises(RunLocked):
        WriterLock.acquire(tmp_path / "a")
    a.release()
    a.release()
    assert not a.held
    with WriterLock.acquire(tmp_path / "a") as again:
        assert again.held
    b.release()


def test_a_runtime_that_fails_to_open_lets_the_lock_go(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_bytes(b"not a record\nnor this\n")  # corrupt before the tail
    with pytest.raises(Exception, match=r"events\.jsonl"):
        Runtime(tmp_path, [])
    assert lock_holder(tmp_path) is None


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from engine.log import EventLog
    log = EventLog.open(sys.argv[1] + "/events.jsonl")
    print("locked", flush=True)
    time.sleep(120)
    """
)


def test_sigkill_of_the_holder_frees_the_run_for_the_next_writer(tmp_path: Path) -> None:
    run = tmp_path / "run-k"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run)], cwd=REPO, stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLocked) as err:
            EventLog.open(run / "events.jsonl")
        assert err.value.pid == holder.pid
        assert (run / LOCK_NAME).read_text().strip() == str(holder.pid)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    # The kernel dropped the dead process's lock: no stale pid file to clear by hand.
    log = EventLog.open(run / "events.jsonl")
    try:
        assert lock_holder(run) == os.getpid()
    finally:
        log.close()
