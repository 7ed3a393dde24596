"""A separate process that writes a run while a watcher follows it (the writer side of the follow tests).

``python -m tests.views.watch.append_child RUN_DIR BATCHES PER_BATCH ACK_DIR``: writes BATCHES batches of
PER_BATCH episodes through a real Runtime; after each batch it waits for ``ACK_DIR/ack-<batch>`` (created by
the watcher once it has shown that batch), or, with ACK_DIR ``-``, sleeps a little. Then ``run.finished``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

from engine.runtime import Runtime
from events import BatchStarted, EpisodeFinished, EpisodeStarted, RunFinished, RunStarted


async def _wait(path: Path, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not await anyio.Path(path).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"append_child: no {path.name} within {limit_s}s: the watcher did not follow")
        await anyio.sleep(0.01)


async def main(run_dir: Path, batches: int, per: int, ack_dir: str) -> None:
    async with Runtime(run_dir, [], run_id=run_dir.name) as rt:
        await rt.emit(
            RunStarted(run_id=run_dir.name, seed=1, code_version="test", config={"outer": {"steps": batches}})
        )
        for b in range(1, batches + 1):
            await rt.emit(BatchStarted(step=b, task_ids=[f"t{b}-{i}" for i in range(per)], group_size=1))
            for i in range(per):
                ep = f"ep-{b}-{i}"
                await rt.emit(
                    EpisodeStarted(episode_id=ep, task_id=f"t{b}-{i}", family="calc_chain", policy="scripted")
                )
                await rt.emit(EpisodeFinished(episode_id=ep, status="validated" if i % 2 == 0 else "rejected"))
            if ack_dir == "-":
                await anyio.sleep(0.3)
            else:
                await _wait(Path(ack_dir) / f"ack-{b}", 30.0)
        await rt.emit(RunFinished(status="ok"))


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
