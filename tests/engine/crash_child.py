"""Crash-test child: emits events through a real Runtime until it is killed.

``python -m tests.engine.crash_child DIR [PRODUCERS] [SNAPSHOT_EVERY]`` (from the repository root) opens,
and so recovers, the run in DIR with ``batch`` durability; several producers then emit ``body_for(seq)``
in a loop, and once each emitted event is durable the child prints ``ACK <seq> <durable bytes>`` (flushed), so the
parent knows exactly which events were acknowledged and how much of the file was fsynced at that point.
Every SNAPSHOT_EVERY events it writes a snapshot, so kills also land around snapshots.

``python -m tests.engine.crash_child --zygote`` is the same child, started fast: importing the engine
costs about half a second, so the zygote imports once, then for each ``RUN DIR PRODUCERS SNAPSHOT_EVERY``
line on stdin it forks a fresh process that runs the child (printing ``PID <pid>`` first), waits for it
and prints ``DONE <wait status>``. The forked process shares nothing live with the zygote (which never
runs an event loop or a thread), so a SIGKILL to it is the same crash as to a freshly started child.
"""

from __future__ import annotations

import os
import sys
import traceback

import anyio

from engine.runtime import Runtime
from tests.engine.spine_model import body_for, projections

RUN_ID = "crash"


async def main(directory: str, producers: int, snapshot_every: int) -> None:
    out = sys.stdout
    async with Runtime(directory, projections(), run_id=RUN_ID, durability="batch") as rt:

        async def produce() -> None:
            while True:
                n = rt.next_seq  # no await before emit submits it: the body is built for this very seq
                rec = await rt.emit(body_for(n, RUN_ID))
                if rec.seq != n:
                    raise AssertionError(f"emitted seq {rec.seq}, expected {n}")
                # The ACK line is a reply to a client (an effect that leaves the process): it waits for
                # durability, as every effect does. The emit itself was acknowledged in the buffer.
                await rt.durable(rec.seq)
                out.write(f"ACK {rec.seq} {rt.log.bytes_written}\n")
                out.flush()
                if snapshot_every and rec.seq % snapshot_every == 0:
                    await rt.snapshot()

        async with anyio.create_task_group() as tg:
            for _ in range(producers):
                tg.start_soon(produce)


def zygote() -> None:
    for line in sys.stdin:
        _, directory, producers, snapshot_every = line.split()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                anyio.run(main, directory, int(producers), int(snapshot_every))
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                os._exit(code)  # never fall back into the zygote's loop
        print(f"PID {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"DONE {status}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--zygote"]:
        zygote()
    else:
        anyio.run(main, args[0], int(args[1]) if len(args) > 1 else 4, int(args[2]) if len(args) > 2 else 0)
