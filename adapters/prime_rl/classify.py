"""Why a prime-rl run failed, from its exit code and its logs: config error, env crash, OOM, timeout, trainer crash.

The evidence (read by the runner, passed in as text) is the launcher's own output, the per-process logs
under ``logs/latest/`` (``trainer.log``, ``orchestrator.log``, ``inference.log``, ``envs/train/*.log``)
and, for the 1-GPU layout, the separately started inference server's log. The rules, in order:

1. we stopped it at its deadline -> ``timeout``;
2. an out-of-memory signature anywhere (CUDA OOM, cuBLAS alloc failure, vLLM "no available memory for
   the cache blocks") -> ``oom``;
3. the launcher's "<process> failed with exit code N" names the process that died first: a train env
   server -> ``env_crash``; the trainer or vLLM -> ``trainer_crash``;
4. otherwise env evidence (an env log with a traceback, a traceback ending in the agent's env module,
   verifiers' env/task/toolset/harness errors in the orchestrator log) -> ``env_crash``;
5. killed by SIGKILL without us asking (the host OOM killer, typically) -> ``oom``;
6. anything else -> ``trainer_crash``, with the most specific error line found.

The dry run only validates and writes configs, so its failures are ``config_error`` unless the agent's
env module itself raised on import (``env_crash``). Log lines carry ANSI colour codes (prime-rl forces
loguru colours in the per-process logs); they are stripped before matching.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from handlers.ports.inner_trainer import FailureReason

__all__ = ["Failure", "classify_dry_run", "classify_run", "is_oom", "last_error_line", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|No available memory for the cache blocks"
    r"|larger than the maximum number of tokens that can be stored in KV cache|CUDA error: out of memory",
)
_ENV_SERVER_FAILED = re.compile(r"(?:Train|Eval) env server \S+ failed with exit code", re.IGNORECASE)
_ENV_ERRORS = re.compile(r"\b(?:EnvError|TaskError|ToolsetError|HarnessError)\b")
_TASKSET_NOT_FOUND = re.compile(r"taskset '[^']*' not found \(tried to import '[^']*'\)")
_CONFIG_ERROR = re.compile(r"Config file error|validation errors? for \w+|Extra inputs are not permitted")
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b.*$")
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')
_LAUNCHER_FAILED = re.compile(r"(?:Error: )?(\w[\w ]*) failed with exit code (-?\d+)")


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    reason: FailureReason
    detail: str  # one line naming where the evidence is, e.g. "trainer.log: torch.OutOfMemoryError: CUDA out of ..."


def is_oom(text: str) -> bool:
    """Whether ``text`` holds an out-of-memory signature (GPU or vLLM KV cache)."""
    return _OOM.search(strip_ansi(text)) is not None


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _clip(line: str, limit: int = 300) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def last_error_line(text: str) -> str | None:
    """The last line that looks like a raised exception (``ValueError: ...``), if any."""
    found = None
    for line in strip_ansi(text).splitlines():
        if _EXC_LINE.match(line.strip()):
            found = line
    return _clip(found) if found is not None else None


def _first_match(pattern: re.Pattern[str], texts: Mapping[str, str]) -> str | None:
    for name, text in texts.items():
        for line in strip_ansi(text).splitlines():
            if pattern.search(line):
                return f"{name}: {_clip(line)}"
    return None


def _env_traceback(text: str, env_module: str) -> bool:
    """Whether the innermost traceback frame is in the agent's env package."""
    frames = [m.group(1) for line in strip_ansi(text).splitlines() if (m := _FRAME.match(line))]
    return bool(frames) and f"/{env_module}/" in frames[-1].replace("\\", "/")


def classify_dry_run(output: str, *, env_module: str) -> Failure:
    """A failed ``rl --dry-run``: config error, or the agent's env raising on import."""
    text = strip_ansi(output)
    if _env_traceback(text, env_module):
        err = last_error_line(text) or "the env package raised while being imported"
        return Failure(reason="env_crash", detail=f"importing env module {env_module!r} failed: {err}")
    if found := _TASKSET_NOT_FOUND.search(text):
        return Failure(
            reason="config_error",
            detail=f"[env].id does not name an installed env package: {_clip(found.group(0))}",
        )
    if _CONFIG_ERROR.search(text):
        # The pydantic box: keep the field path and message lines, drop the frame characters.
        lines = [ln.strip(" │╭╮╰╯─") for ln in text.splitlines() if ln.strip(" │╭╮╰╯─")]
        start = next((i for i, ln in enumerate(lines) if "validation error" in ln), 0)
        return Failure(
            reason="config_error", detail="prime-rl refused the config: " + " ".join(lines[start : start + 6])
        )
    last = last_error_line(text)
    return Failure(reason="config_error", detail=f"rl --dry-run failed: {last or _clip(text[-300:])}")


def _first_failed_process(rl_log: str) -> tuple[str, str] | None:
    """(process name, the launcher's line) of the first "<process> failed with exit code N" in its output."""
    for line in strip_ansi(rl_log).splitlines():
        if m := _LAUNCHER_FAILED.search(line):
            return m.group(1).strip(), _clip(line)
    return None


def _crash_detail(logs: Mapping[str, str], order: tuple[str, ...], launcher: str | None) -> str | None:
    for name in order:
        if name in logs and (err := last_error_line(logs[name])):
            return f"{launcher}; {name}: {err}" if launcher else f"{name}: {err}"
    return None


def _env_evidence(logs: Mapping[str, str], env_logs: Mapping[str, str], env_module: str) -> str | None:
    for name, text in env_logs.items():
        if "Traceback (most recent call last)" in text:
            return f"{name}: {last_error_line(text) or 'traceback'}"
    for name, text in logs.items():
        if _env_traceback(text, env_module):
            return f"{name}: {last_error_line(text) or 'traceback in the env'}"
    return _first_match(_ENV_ERRORS, {k: v for k, v in logs.items() if k == "orchestrator.log"})


def classify_run(
    returncode: int,
    *,
    timed_out: bool,
    logs: Mapping[str, str],
    env_logs: Mapping[str, str],
    env_module: str,
    budget_s: float | None = None,
) -> Failure:
    """A failed (or stopped) training run. ``logs`` maps a name (``rl``, ``trainer.log``, ...) to its text.

    The launcher's "<process> failed with exit code N" names the process that died first, which decides
    between the env and the trainer when both left errors behind (an env may log a rollout's traceback and
    carry on while the trainer crashes for its own reason).
    """
    if timed_out:
        limit = f" of {budget_s:.0f}s" if budget_s is not None else ""
        return Failure(reason="timeout", detail=f"training exceeded its time budget{limit} and was stopped")
    if oom := _first_match(_OOM, {**logs, **env_logs}):
        return Failure(reason="oom", detail=oom)
    first = _first_failed_process(logs.get("rl", ""))
    process, launcher = first if first is not None else ("", None)
    if _ENV_SERVER_FAILED.search(launcher or ""):
        err = next((f"{name}: {e}" for name, text in env_logs.items() if (e := last_error_line(text))), None)
        return Failure(reason="env_crash", detail=err or launcher or "an env server failed")
    if process in ("Trainer", "Inference"):
        logs_of: tuple[str, ...] = ("trainer.log", "rl")
        if process == "Inference":
            logs_of = ("inference.log", "inference_server.log", "rl")
        return Failure(reason="trainer_crash", detail=_crash_detail(logs, logs_of, launcher) or launcher or process)
    if env := _env_evidence(logs, env_logs, env_module):
        return Failure(reason="env_crash", detail=env)
    if returncode in (-9, 137):
        why = f"killed by SIGKILL (exit {returncode}) without a deadline: likely the host OOM killer"
        return Failure(reason="oom", detail=why)
    order = ("trainer.log", "orchestrator.log", "inference.log", "inference_server.log", "rl")
    fallback = launcher or f"rl exited with code {returncode} and no error in its logs"
    return Failure(reason="trainer_crash", detail=_crash_detail(logs, order, launcher) or fallback)
