"""Uid leases: two engines on one host never give two children the same uid (one's sweep would kill the other's)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.sandbox import uids

PROJECT = Path(__file__).resolve().parents[3]
PID = 4242  # both engines pretend to have this pid: they start from the same base and try the same uids in turn

# Another engine: it takes three uids, says which, and holds them until its stdin closes.
_OTHER = f"""
import os, sys
os.getpid = lambda: {PID}
from adapters.sandbox import uids
print(*[uids.fresh_uid() for _ in range(3)], flush=True)
sys.stdin.read()
"""


@pytest.fixture
def same_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uids.os, "getpid", lambda: PID)
    monkeypatch.setattr(uids, "_uid_counter", itertools.count())


def _take(n: int) -> list[int]:
    taken = [uids.fresh_uid() for _ in range(n)]
    uids._uid_counter = itertools.count()  # the next engine's turn starts where this one's did
    return taken


def test_a_uid_another_engine_holds_is_never_handed_out(same_start: None) -> None:
    other = subprocess.Popen(
        [sys.executable, "-c", _OTHER], cwd=PROJECT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        held = {int(u) for u in other.stdout.readline().split()}
        assert len(held) == 3
        mine = _take(3)
        try:
            assert not held & set(mine), (held, mine)
        finally:
            for uid in mine:
                uids.release_uid(uid)
    finally:
        assert other.stdin is not None and other.stdout is not None
        other.stdin.close()
        other.wait(10)
        other.stdout.close()
    # The other engine is gone, and its leases with it: the same turn now hands out the uids it held (so the
    # uids above were other ones because of the leases, not because the two engines tried different uids).
    again = _take(3)
    try:
        assert set(again) == held
    finally:
        for uid in again:
            uids.release_uid(uid)


def test_a_released_uid_is_free_for_the_next_child(same_start: None) -> None:
    first = _take(1)[0]
    assert _take(1)[0] != first  # still held by this engine
    uids.release_uid(first)
    second = _take(1)[0]
    uids.release_uid(second)
    uids.release_uid(second)  # a second release is ignored
    assert second == first


@pytest.mark.parametrize("pid", [4242, 1023, 70_000])
def test_engines_started_one_after_another_try_different_uids_first(monkeypatch: pytest.MonkeyPatch, pid: int) -> None:
    # (So that a uid one engine released is not the next one its neighbour takes: the integrity tests look for
    # processes of a probe's uid after it ended, and the test workers' pids are consecutive.)
    firsts = []
    for p in (pid, pid + 1, pid + 2):
        monkeypatch.setattr(uids.os, "getpid", lambda p=p: p)
        candidates = uids._candidates()
        firsts.append({next(candidates) for _ in range(64)})
    assert not firsts[0] & firsts[1] and not firsts[1] & firsts[2] and not firsts[0] & firsts[2]
    assert all(61000 <= uid < 61000 + 65536 for block in firsts for uid in block)


def test_a_link_planted_under_a_uids_name_is_no_lease(same_start: None, tmp_path: Path) -> None:
    where = uids._lease_dir()
    assert where is not None
    first = next(uids._candidates())
    uids._uid_counter = itertools.count()
    target = tmp_path / "written-through-the-link"
    (where / str(first)).unlink(missing_ok=True)
    (where / str(first)).symlink_to(target)
    try:
        got = uids.fresh_uid()
        uids.release_uid(got)
    finally:
        (where / str(first)).unlink()
    assert got != first and not target.exists()
    # (without the link, that turn gives the first uid: the link, not a lease elsewhere, kept it out)
    uids._uid_counter = itertools.count()
    again = uids.fresh_uid()
    uids.release_uid(again)
    assert again == first


def test_a_lock_on_a_file_its_holder_removed_is_no_lease(same_start: None, monkeypatch: pytest.MonkeyPatch) -> None:
    where = uids._lease_dir()
    assert where is not None
    uid = uids.fresh_uid()
    assert (where / str(uid)).exists()
    uids.release_uid(uid)
    assert not (where / str(uid)).exists()  # released: the file goes with the lease
    # The holder lets go between this engine's open and its lock: the file this engine holds open is no longer
    # under the uid's name (another engine may make a new one and lock that), so the lock on it is no lease.
    real_open = uids.os.open

    def open_then_holder_releases(path: Path, *args: int) -> int:
        fd = real_open(path, *args)
        Path(path).unlink()
        return fd

    monkeypatch.setattr(uids.os, "open", open_then_holder_releases)
    assert uids._lease(uid) is False and uid not in uids._leases
    monkeypatch.setattr(uids.os, "open", real_open)
    assert uids._lease(uid) is True  # the control: the same lease, taken without the race
    uids.release_uid(uid)
