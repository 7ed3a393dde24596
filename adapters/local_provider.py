"""The ``local`` compute provider: each pod is an ``ait pod-agent`` subprocess on 127.0.0.1.

The same protocol and code path as a remote pod: the dispatcher launches, health-checks, talks HTTP to and
terminates these exactly as it does Runpod pods. Each pod

- runs in its own session / process group (``start_new_session``), so terminating it kills the agent and
  everything the trainer started, and a controller that dies does not take its pods with it (a resumed
  controller adopts them, as on a real provider);
- gets its bearer token in a 0600 file (``--token-file``), never on a command line or in its environment;
- listens on port 0 and writes its URL to ``agent.json`` (and prints it);
- keeps its record in ``<state_dir>/<provider_id>/pod.json``, which is what makes pods findable by name
  after the controller restarts (``list_pods(prefix)``), like a provider's account.

GPU types are labels here (the ladder may name any); every pod costs what the price table says for ``local``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import anyio
import msgspec
import structlog

from adapters.pod.tokens import TOKEN_ENV
from handlers.ports.provider import InvalidPodRequest, PodInfo, PodSpec, PodState, Provider, ProvisionError

__all__ = ["LocalProvider"]

log = structlog.get_logger("adapters.local_provider")

_ROOT = Path(__file__).resolve().parents[1]  # the project root, put on the pods' PYTHONPATH


class _Record(msgspec.Struct, kw_only=True):
    provider_id: str
    name: str
    gpu_type: str
    gpu_count: int
    created_at: float
    pid: int = 0
    start_ticks: int = -1  # the process's start time in clock ticks (Linux): guards against pid reuse
    terminated: bool = False


def _start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, or -1 where /proc is not available; -2 when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return -2
    except OSError:
        return -1
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields and fields[0] == "Z":  # a zombie is dead, whoever reaps it
        return -2
    return int(fields[19]) if len(fields) > 19 else -1


def _spawn(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    # Its own session: the pod outlives a controller that dies, and killpg reaches all it started.
    with log_path.open("ab") as out:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _find_agent(pod_dir: Path) -> int:
    """The pid of the agent serving ``pod_dir`` (its ``agent.json``, else its command line naming the token file)."""
    try:
        pid = json.loads((pod_dir / "agent.json").read_text()).get("pid", 0)
        if isinstance(pid, int) and pid > 0:
            return pid
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    needle = str(pod_dir / "token").encode()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if needle in (proc / "cmdline").read_bytes().split(b"\0"):
                return int(proc.name)
    return 0


class LocalProvider:
    name: ClassVar[str] = "local"

    def __init__(
        self,
        command: Sequence[str],
        state_dir: Path | str,
        *,
        trainer: str = "standin",
        trainer_options: Mapping[str, str] | None = None,
        idle_exit_s: float = 1800.0,
        term_grace_s: float = 3.0,
        usd_per_hour: float = 0.0,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.trainer = trainer
        self.trainer_options = dict(trainer_options or {})
        # ``ait pod-agent`` as the composition root starts it (the CLI passes it in: no module path by string here)
        self.command = list(command)
        self.idle_exit_s = idle_exit_s
        self.term_grace_s = term_grace_s
        self.usd_per_hour = usd_per_hour
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def __repr__(self) -> str:
        return f"LocalProvider(state_dir={str(self.state_dir)!r}, trainer={self.trainer!r})"

    # -- records -----------------------------------------------------------------------------------

    def _dir(self, provider_id: str) -> Path:
        return self.state_dir / provider_id

    def _load(self, provider_id: str) -> _Record | None:
        try:
            return msgspec.json.decode((self._dir(provider_id) / "pod.json").read_bytes(), type=_Record)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("local.bad_record", provider_id=provider_id, error=str(exc))
            return None

    def _write(self, rec: _Record) -> None:
        path = self._dir(rec.provider_id) / "pod.json"
        tmp = path.with_name("pod.json.tmp")
        tmp.write_bytes(msgspec.json.encode(rec))
        os.replace(tmp, path)

    def _records(self) -> list[_Record]:
        if not self.state_dir.is_dir():
            return []
        recs = (self._read(d.name) for d in sorted(self.state_dir.iterdir()) if d.is_dir())
        return [r for r in recs if r is not None]

    def _read(self, provider_id: str) -> _Record | None:
        rec = self._load(provider_id)
        if rec is not None and rec.pid <= 0 and not rec.terminated:
            # A controller died between spawning the agent and recording its pid: find the process.
            pid = _find_agent(self._dir(provider_id))
            if pid > 0:
                rec.pid, rec.start_ticks = pid, _start_ticks(pid)
                self._write(rec)
        return rec

    def _alive(self, rec: _Record) -> bool:
        if rec.pid <= 0:
            return False
        proc = self._procs.get(rec.pid)
        if proc is not None:
            return proc.poll() is None
        ticks = _start_ticks(rec.pid)
        if ticks == -2:
            return False
        if ticks >= 0 and rec.start_ticks >= 0:
            return ticks == rec.start_ticks
        try:
            os.kill(rec.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _url(self, provider_id: str) -> str:
        try:
            data = json.loads((self._dir(provider_id) / "agent.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return ""
        url = data.get("url", "")
        return url if isinstance(url, str) else ""

    def _info(self, rec: _Record) -> PodInfo:
        alive = self._alive(rec)
        url = self._url(rec.provider_id) if alive else ""
        if rec.terminated:
            state, raw = PodState.GONE, "terminated"
        elif not alive:
            state, raw = PodState.FAILED, "exited"
        elif url:
            state, raw = PodState.RUNNING, "running"
        else:
            state, raw = PodState.PENDING, "starting"
        return PodInfo(
            provider_id=rec.provider_id,
            name=rec.name,
            state=state,
            gpu_type=rec.gpu_type,
            gpu_count=rec.gpu_count,
            usd_per_hour=self.usd_per_hour,
            url=url,
            raw_status=raw,
            created_at=f"{rec.created_at:.3f}",
        )

    # -- the port ----------------------------------------------------------------------------------

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        for rec in self._records():
            if rec.name == idempotency_name and not rec.terminated:
                return self._info(rec)
        token = spec.env.get(TOKEN_ENV, "")
        if len(token) < 16:
            raise InvalidPodRequest(f"local: the pod spec carries no {TOKEN_ENV} (a bearer token of 16+ characters)")
        provider_id = f"lp-{secrets.token_hex(4)}"
        pod_dir = self._dir(provider_id)
        pod_dir.mkdir(parents=True)
        rec = _Record(
            provider_id=provider_id,
            name=idempotency_name,
            gpu_type=spec.gpu_type,
            gpu_count=spec.gpu_count,
            created_at=time.time(),
        )
        self._write(rec)  # before spawning: a crash right after still leaves the pod findable by name
        token_file = pod_dir / "token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        argv = [
            *self.command,
            *("--host", "127.0.0.1", "--port", "0", "--token-file", str(token_file)),
            *("--trainer", self.trainer, "--workdir", str(pod_dir / "work"), "--url-file", str(pod_dir / "agent.json")),
            *("--idle-exit-s", str(self.idle_exit_s)),
        ]
        for key, value in sorted(self.trainer_options.items()):
            argv += ["--trainer-opt", f"{key}={value}"]
        env = {**os.environ, **{k: v for k, v in spec.env.items() if k != TOKEN_ENV}}
        env.pop(TOKEN_ENV, None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            proc = await anyio.to_thread.run_sync(_spawn, argv, env, pod_dir / "agent.log")
        except OSError as exc:
            rec.terminated = True
            self._write(rec)
            raise ProvisionError(f"local: cannot start the pod agent: {exc}") from None
        self._procs[proc.pid] = proc
        rec.pid, rec.start_ticks = proc.pid, _start_ticks(proc.pid)
        self._write(rec)
        log.info("local.pod_started", provider_id=provider_id, name=idempotency_name, pid=proc.pid)
        return self._info(rec)

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        rec = self._read(provider_id)
        return None if rec is None else self._info(rec)

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        return [self._info(r) for r in self._records() if r.name.startswith(prefix)]

    async def terminate_pod(self, provider_id: str) -> None:
        rec = self._read(provider_id)
        if rec is None:
            return
        if rec.terminated:  # by another controller, maybe: only reap our own handle on it
            await self._reap(rec.pid)
            return
        if self._alive(rec) or rec.pid in self._procs:
            self._signal(rec.pid, signal.SIGTERM)
            for _ in range(max(1, round(self.term_grace_s / 0.05))):
                if not self._alive(rec):
                    break
                await anyio.sleep(0.05)
            # Whatever is left of the group (the trainer's children included) is killed outright.
            self._signal(rec.pid, signal.SIGKILL)
        await self._reap(rec.pid)
        rec.terminated = True
        self._write(rec)
        (self._dir(provider_id) / "token").unlink(missing_ok=True)
        log.info("local.pod_terminated", provider_id=provider_id, pid=rec.pid)

    async def _reap(self, pid: int) -> None:
        proc = self._procs.pop(pid, None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await anyio.to_thread.run_sync(proc.wait, 5.0)

    @staticmethod
    def _signal(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


if TYPE_CHECKING:

    def _implements_the_port(p: LocalProvider) -> Provider:  # mypy checks the structural match
        return p
