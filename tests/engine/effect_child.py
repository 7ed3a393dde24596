"""Effect-crash child: launches pod creations through a real Runtime until it is killed.

``python -m tests.engine.effect_child DIR [--no-barrier]`` (from the repository root) opens, and so
recovers, the run in DIR (``batch`` durability, with every fsync of the log slowed by 20 ms so that the
window between an effect and the next fsync is wide). It first re-issues, with their keys, the requests the
log holds without an outcome (the resume path), then several producers loop: emit ``pod.requested`` and an
unrelated event (both acknowledged in the buffer), create the pod at a file-backed provider through
:class:`~handlers.durable_ports.DurableProvider` (which waits until the request is durable), print
``EFFECT <key>`` (flushed) and emit ``pod.ready`` without waiting for its fsync. The parent kills it right
after an EFFECT line: between an effect and the fsync of its outcome.

The provider appends each pod it creates to ``DIR/provider.txt`` (fsynced: the outside world keeps what it
did) and, like Runpod, finds a pod by its name before creating it again. ``--no-barrier`` calls the
provider directly, without the barrier: the negative control the test uses to show its check can fail.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio

from engine.runtime import Runtime
from events import JobQueued, PodReady, PodRequested, Recorded
from handlers.durable_ports import DurableProvider
from handlers.ports.provider import PodInfo, PodSpec, PodState, Provider, pod_name

RUN_ID = "fx"
PROVIDER_FILE = "provider.txt"
SLOW_FSYNC_S = 0.02
SPEC = PodSpec(gpu_type="A40", image="img")
_real_fsync = os.fsync


class FileProvider:
    """A provider whose pods are lines of a file: idempotent by name, durable on its own."""

    name = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pods = set(path.read_text().split()) if path.exists() else set()

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        if idempotency_name not in self.pods:
            with self.path.open("a") as f:
                f.write(idempotency_name + "\n")
                f.flush()
                _real_fsync(f.fileno())
            self.pods.add(idempotency_name)
        return PodInfo(provider_id=idempotency_name, name=idempotency_name, state=PodState.RUNNING)

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        return None

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        return []

    async def terminate_pod(self, provider_id: str) -> None:
        return None


def _slow_fsync(fd: int) -> None:
    time.sleep(SLOW_FSYNC_S)
    _real_fsync(fd)


async def launch(rt: Runtime, port: Provider, rec: Recorded) -> None:
    ev = rec.event
    assert isinstance(ev, PodRequested)
    info = await port.create_pod(SPEC, pod_name(RUN_ID, ev.pod_id))
    sys.stdout.write(f"EFFECT {ev.key}\n")
    sys.stdout.flush()
    await rt.emit(PodReady(key=ev.key, pod_id=ev.pod_id, provider_id=info.provider_id, url=""))


async def main(directory: str, barrier: bool, resume_only: bool) -> None:
    os.fsync = _slow_fsync  # the log's fsyncs only: the provider keeps the real one
    provider = FileProvider(Path(directory) / PROVIDER_FILE)
    async with Runtime(directory, [], run_id=RUN_ID, durability="batch") as rt:
        port: Provider = DurableProvider(provider, rt.durable) if barrier else provider
        for rec in rt.pending_requests():  # resume: the same keys, so the same pod names
            await launch(rt, port, rec)
        if resume_only:
            return

        async def produce() -> None:
            while True:
                seq = rt.next_seq
                rec = await rt.emit(PodRequested(pod_id=f"p{seq}", gpu_type="A40", provider="file"))
                await rt.emit(JobQueued(job_id=f"j{seq}", episode_id="e", family="f", base_model="m", bundle="b"))
                await launch(rt, port, rec)

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(produce)


if __name__ == "__main__":
    args = sys.argv[1:]
    anyio.run(main, args[0], "--no-barrier" not in args, "--resume-only" in args)
