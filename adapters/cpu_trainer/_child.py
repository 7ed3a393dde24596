"""The CPU trainer's training child: the only process where the agent's env code runs on the CPU path.

Started by :mod:`._trainer` under :mod:`._confine` with one argument, its request (:class:`ChildRequest`,
JSON). Before anything else it applies the rlimits, ``PR_SET_NO_NEW_PRIVS`` and drops to its unprivileged
uid (the probe driver's own ``apply_limits``); then it loads the base checkpoint (read-only), imports the
agent's env, trains with :func:`._loop.train` and writes to its output directory:

- ``progress.jsonl``: one JSON object per line: ``{"event": "env_import"}`` before the agent's code first
  runs, ``{"event": "training"}``, then ``{"event": "step", "record": <StepRecord>}`` per step;
- ``model.safetensors``: the trained weights (safetensors: loading them runs no code);
- ``report.json``: a :class:`ChildReport` (the train report, or a classified failure).

The process is sealed from the installation key (``AIT_EVAL_KEY_SEALED=1``: ``families`` refuses to
build the hidden split) and, under bubblewrap, the key, the project tree and the run directories are not
mounted. It never scores: the trainer scores the weights in its own process, which never imports the env.
Everything written here is untrusted (the agent's code shares this process) and read as data only.

It imports the agent's env before the training stack (torch, transformers): an env that fails to import
costs seconds, not the stack's start-up. Step records and the train report travel as raw JSON the trainer
decodes with the real types, so this module's own imports stay light.
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from pathlib import Path
from typing import Any, Literal

import msgspec

from ._settings import CpuTrainSettings

__all__ = ["ChildReport", "ChildRequest", "StepLine", "main"]

ChildFailure = Literal["env_crash", "trainer_crash"]


class ChildRequest(msgspec.Struct, frozen=True, kw_only=True):
    checkpoint: str  # the base checkpoint directory (as the child sees it)
    env_id: str
    env_dir: str  # the copy of the env package
    env_config: dict[str, Any]
    family: str
    settings: CpuTrainSettings
    deadline_s: float | None  # seconds from the child's start; training stops between steps after it
    out_dir: str
    rlimits: dict[str, int]
    uid: int | None


class ChildReport(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    failure: ChildFailure | None = None
    detail: str = ""
    report: msgspec.Raw = msgspec.Raw(b"null")  # a TrainReport when ok
    setup_seconds: float = 0.0
    cpu_seconds: float = 0.0  # user + system CPU of this process and its reaped children (tool servers)


class StepLine(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``progress.jsonl`` (``record`` only on ``step`` lines)."""

    event: str
    record: msgspec.Raw = msgspec.Raw(b"null")  # a StepRecord on "step" lines


_ENC = msgspec.json.Encoder()


class _Channel:
    def __init__(self, out: Path) -> None:
        self._out = out
        self._file = (out / "progress.jsonl").open("ab", buffering=0)
        self.env_started = False

    def send(self, line: StepLine) -> None:
        self.env_started = self.env_started or line.event == "env_import"
        self._file.write(_ENC.encode(line) + b"\n")

    def report(self, report: ChildReport) -> None:
        tmp = self._out / ".report.json.tmp"
        tmp.write_bytes(_ENC.encode(report))
        tmp.replace(self._out / "report.json")


async def _train(req: ChildRequest, channel: _Channel, started: float) -> ChildReport:
    from adapters.inproc import EnvLoadError, load_env

    channel.send(StepLine(event="env_import"))
    try:
        env = load_env(req.env_id, path=req.env_dir, config=req.env_config, defaults={"family": req.family})
    except EnvLoadError as exc:
        return ChildReport(ok=False, failure="env_crash", detail=str(exc))

    import torch
    from safetensors.torch import save_model

    from adapters.tiny.model import load_checkpoint

    from ._loop import EnvFailure, StepRecord, train

    torch.set_num_threads(req.settings.threads)
    ckpt = load_checkpoint(req.checkpoint)
    setup = time.monotonic() - started
    channel.send(StepLine(event="training"))
    deadline = None if req.deadline_s is None else started + req.deadline_s

    async def on_step(record: StepRecord) -> None:
        channel.send(StepLine(event="step", record=msgspec.Raw(_ENC.encode(record))))

    try:
        report = await train(ckpt, env, req.settings, on_step=on_step, deadline=deadline)
    except (EnvFailure, EnvLoadError) as exc:
        return ChildReport(ok=False, failure="env_crash", detail=str(exc), setup_seconds=setup)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
        return ChildReport(ok=False, failure="trainer_crash", detail=detail, setup_seconds=setup)
    save_model(ckpt.model, str(Path(req.out_dir) / "model.safetensors"))
    return ChildReport(ok=True, report=msgspec.Raw(_ENC.encode(report)), setup_seconds=setup)


def _cpu_seconds() -> float:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, 3)


def main(argv: list[str]) -> int:
    """``python -c BOOT <request.json>``: 0 when training ran (see the report), 3 on a classified failure."""
    started = time.monotonic()
    req = msgspec.json.decode(Path(argv[0]).read_bytes(), type=ChildRequest)
    from adapters.probe.sandbox_driver import apply_limits

    # Before any agent code: rlimits, no new privileges, the unprivileged uid (root keeps none of its files).
    apply_limits({"rlimits": req.rlimits, "uid": req.uid, "gid": req.uid})
    os.umask(0o022)  # what the child writes, the trainer (another uid, maybe) must read
    channel = _Channel(Path(req.out_dir))
    try:
        result = asyncio.run(_train(req, channel, started))
    except BaseException as exc:  # a bug here, or the env's code ending the process some other way
        who: ChildFailure = "env_crash" if channel.env_started else "trainer_crash"
        result = ChildReport(ok=False, failure=who, detail=f"the training process ended: {type(exc).__name__}: {exc}")
    channel.report(msgspec.structs.replace(result, cpu_seconds=_cpu_seconds()))
    return 0 if result.ok else 3
