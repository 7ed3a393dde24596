"""Crash tests: a child process emitting events is SIGKILLed at random points, then the run is reopened.

Tier 1 (kill -9): no acknowledged event is lost, seq has no gap, the reopened projections (snapshot + tail)
equal the model and a full rebuild. A kill leaves the page cache intact, so it rarely tears a line.

Tier 2 (simulated power loss, after each kill): bytes that were never fsynced may vanish. Drop them from a
random point between the last acknowledged-durable offset and EOF (often tearing the last line), and on a
copy flip one byte in a line before the last: the torn tail must be recovered and reported, the flip
refused with its line number, never skipped.

The seed of each test is printed on failure (``random.Random(seed)``) so a failing cycle can be replayed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import msgspec
import pytest
from structlog.testing import capture_logs

from engine.effects import EffectsProjection
from engine.log import EventLog, LogCorrupted, read_log
from engine.projection import state_hash
from engine.runtime import Runtime
from events import EventBody, Recorded, Request
from tests.engine.crash_child import RUN_ID
from tests.engine.spine_model import Model, body_for, fold_all, live_states, projections

ROOT = Path(__file__).resolve().parents[2]
CHILD = [sys.executable, "-m", "tests.engine.crash_child"]


@dataclass
class Cycle:
    acks: list[tuple[int, int]]  # (seq, durable bytes when its emit returned)
    killed: bool  # the child died of our SIGKILL (not on its own)
    output: list[str]  # what else it printed (a traceback, recovery warnings)


class Lines:
    """A child's stdout, read line by line on a thread so that the test can poll it with a timeout."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.queue: queue.Queue[bytes | None] = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.queue.put(raw)
        self.queue.put(None)  # EOF

    def get(self, timeout: float) -> bytes | Literal[False] | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return False


def drive(lines: Lines, rng: random.Random, pid: int | None, startup: float) -> tuple[Cycle, int | None]:
    """Read a child's output and SIGKILL it at a random point: after a random number of ACKs, or (for 0)
    a random moment that may fall before, during or after its start-up and recovery. Returns the cycle
    and the child's wait status when the output ends with a zygote's ``DONE`` line."""
    acks: list[tuple[int, int]] = []
    output: list[str] = []
    want = rng.choice([0, 1, 5, 20, 60, 120])
    kill_at = time.monotonic() + rng.uniform(0.0, startup) if want == 0 else None
    killed = False
    give_up = time.monotonic() + 60
    while True:
        assert time.monotonic() < give_up, f"the child hung: {output[-5:]}"
        line = lines.get(timeout=0.002)
        if line is None:
            return Cycle(acks, killed, output), None  # EOF: a fresh child is gone
        if line:
            if line.startswith(b"ACK "):
                _, seq, durable = line.split()
                acks.append((int(seq), int(durable)))
            elif line.startswith(b"PID "):
                pid = int(line.split()[1])
            elif line.startswith(b"DONE "):
                return Cycle(acks, killed, output), int(line.split()[1])
            else:
                output.append(line.decode(errors="replace"))
        if kill_at is None and len(acks) >= want:
            kill_at = time.monotonic() + rng.uniform(0.0, 0.01)
        if not killed and pid is not None and kill_at is not None and time.monotonic() >= kill_at:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed = True


def run_fresh(directory: Path, rng: random.Random) -> Cycle:
    """One child as its own freshly started Python process."""
    with subprocess.Popen(
        [*CHILD, str(directory), str(rng.choice([1, 4, 16])), "40"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as proc:
        assert proc.stdout is not None
        cycle, _ = drive(Lines(proc.stdout), rng, proc.pid, startup=0.5)
        proc.wait(timeout=30)
        cycle.killed = cycle.killed and proc.returncode == -signal.SIGKILL
        return cycle


class Zygote:
    """Forks children from one process that has already imported the engine (see crash_child)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [*CHILD, "--zygote"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert self.proc.stdout is not None
        self.lines = Lines(self.proc.stdout)

    def run(self, directory: Path, rng: random.Random) -> Cycle:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"RUN {directory} {rng.choice([1, 4, 16])} 40\n".encode())
        self.proc.stdin.flush()
        cycle, status = drive(self.lines, rng, None, startup=0.05)
        assert status is not None, f"the zygote died: {cycle.output[-5:]}"
        cycle.killed = cycle.killed and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        return cycle

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.lines.thread.join(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    try:
        yield z
    finally:
        z.close()


def expected_body(n: int) -> EventBody:
    """The event the child emits at seq ``n``, with the request key the runtime fills in."""
    body = body_for(n, RUN_ID)
    if isinstance(body, Request) and not body.key:
        body = msgspec.structs.replace(body, key=f"{RUN_ID}:{n}")
    return body


def check_reopen(directory: Path, acked: int) -> list[Recorded]:
    """Reopen the run as a resumed process would and check it against the model. Returns the records."""
    if not (directory / "events.jsonl").exists():  # killed before it created the log
        assert acked == 0
        return []
    records = read_log(directory / "events.jsonl").records  # raises on a gap, a duplicate or a bad line
    assert len(records) >= acked, f"acknowledged events lost: log has {len(records)}, {acked} were acked"
    for rec in records:
        assert rec.event == expected_body(rec.seq), f"seq {rec.seq} holds the wrong event"
    model = Model()
    for n in range(len(records)):
        model.apply(n, expected_body(n))
    rt = Runtime(directory, projections(), run_id=RUN_ID)  # snapshot + tail, as a resume does
    try:
        assert rt.next_seq == len(records)
        assert live_states(rt.states) == model.states()
        pending = {r.event.key: r.seq for r in rt.pending_requests() if isinstance(r.event, Request)}
        assert pending == model.pending
        all_projs = [*projections(), EffectsProjection()]
        assert rt.state_hash() == state_hash(all_projs, fold_all(all_projs, records))
    finally:
        rt.log.close()
    return records


def test_kill_9_loses_no_acknowledged_event(tmp_path: Path, zygote: Zygote) -> None:
    seed = random.randrange(2**32)
    print(f"crash test seed {seed}")  # shown on failure: random.Random(seed) replays the same kills and cuts
    rng = random.Random(seed)
    acked = 0  # events 0..acked-1 have been acknowledged by some child
    in_log = 0  # events in the log after the last reopen
    killed_mid_run = 0
    for cycle in range(50):
        # The first cycles start the child as a fresh process, the rest fork it from the zygote (fast).
        result = run_fresh(tmp_path, rng) if cycle < 3 else zygote.run(tmp_path, rng)
        assert result.killed, f"seed {seed} cycle {cycle}: the child died on its own: {result.output}"
        seqs = [seq for seq, _ in result.acks]
        assert len(set(seqs)) == len(seqs), f"seed {seed}: an event acknowledged twice"
        if seqs:
            assert min(seqs) >= in_log, f"seed {seed} cycle {cycle}: a seq already in the log was reused"
            acked = max(seqs) + 1
            killed_mid_run += 1
        in_log = len(check_reopen(tmp_path, acked))
    assert killed_mid_run >= 25, f"seed {seed}: too few kills landed after the child was emitting"
    assert acked > 500


@pytest.mark.slow
def test_power_loss_drops_only_unsynced_bytes_and_flips_are_reported(tmp_path: Path, zygote: Zygote) -> None:
    seed = random.randrange(2**32)
    print(f"crash test seed {seed}")  # shown on failure: random.Random(seed) replays the same kills and cuts
    rng = random.Random(seed)
    run = tmp_path / "run"
    run.mkdir()
    log_path = run / "events.jsonl"
    EventLog.open(log_path).close()  # an empty log to start from (tier 1 covers kills before it exists)
    acked = 0
    synced = 0  # the log as the last reopen left it was fsynced (by the truncation below)
    torn_recoveries = flips_reported = 0
    for cycle in range(30):
        result = zygote.run(run, rng)
        assert result.killed, f"seed {seed} cycle {cycle}: the child died on its own: {result.output}"
        durable = max([synced] + [d for _, d in result.acks])
        if result.acks:
            acked = max(seq for seq, _ in result.acks) + 1
        data = log_path.read_bytes()
        assert durable <= len(data)

        # A flipped byte in any line but the last, on a copy: reported with its line, never skipped.
        lines = data[: data.rfind(b"\n") + 1].splitlines(keepends=True)
        if len(lines) >= 2:
            bad = rng.randrange(len(lines) - 1)
            offset = rng.randrange(len(lines[bad]))
            at = sum(len(line) for line in lines[:bad]) + offset
            flipped = bytearray(data)
            flipped[at] ^= rng.choice([0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF])
            copy = tmp_path / "flipped" / "events.jsonl"
            copy.parent.mkdir(exist_ok=True)
            copy.write_bytes(bytes(flipped))
            with pytest.raises(LogCorrupted) as info:
                Runtime(copy.parent, projections(), run_id=RUN_ID)
            assert info.value.line_no == bad + 1, f"seed {seed} cycle {cycle}: flip at byte {at}"
            assert copy.read_bytes() == bytes(flipped), "a refused log must be left as it was"
            flips_reported += 1

        # Power loss: everything after a random point past the last durable offset is gone.
        cut = rng.randint(durable, len(data))
        with open(log_path, "r+b") as f:
            f.truncate(cut)
            os.fsync(f.fileno())
        if cycle % 3 == 0 and data[:cut].endswith(b"\n") and lines:
            # The child often syncs everything it wrote, leaving no unsynced bytes to cut into: every
            # third cycle, simulate a write torn by the power loss as a prefix of a record on the tail.
            record = rng.choice(lines)
            partial = record[: rng.randint(1, len(record) - 2)]  # never the whole line, never its newline
            data = data[:cut] + partial
            cut = len(data)
            with open(log_path, "ab") as f:
                f.write(partial)
                os.fsync(f.fileno())
        torn = cut - (data.rfind(b"\n", 0, cut) + 1)
        with capture_logs() as logs:
            records = check_reopen(run, acked)
        if torn:
            torn_recoveries += 1
            assert [e["dropped_bytes"] for e in logs if e["event"] == "log.torn_tail_recovered"] == [torn]
        assert len(log_path.read_bytes()) == cut - torn
        assert len(records) == data[: cut - torn].count(b"\n")
        synced = cut - torn
    assert torn_recoveries >= 5, f"seed {seed}: only {torn_recoveries} torn tails were exercised"
    assert flips_reported >= 20
