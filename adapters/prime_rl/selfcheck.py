"""The pod agent's self-check for the prime-rl trainer: is this machine what the pins say, before any job?

Each check is one :class:`~handlers.ports.pod_agent.SelfCheckItem` naming what it found or why it failed:

- ``bootstrap``: the start command's bootstrap exited 0 (``<root>/bootstrap.status``; absent: not run here);
- ``gpu``: ``nvidia-smi -L`` lists at least the GPUs the trainer needs;
- ``prime_rl_commit``: ``<root>/prime-rl`` is checked out at :data:`.pins.PRIME_RL_COMMIT` (read from its
  ``.git``: a detached checkout names its commit in ``HEAD``; ``git rev-parse`` only when that does not resolve);
- ``prime_rl_import``: prime-rl's venv imports ``prime_rl``, ``verifiers`` and ``vllm`` (one ``python -c``);
- ``vllm``: the version that import printed is :data:`.pins.VLLM_VERSION` (the local build tag may differ);
- ``scoring``: the scoring venv's ``vf-eval`` is there and executable;
- ``ait``: this project's installed version is the controller's (``AIT_VERSION``, when the pod was given one).

Nothing here touches the network and nothing is installed: the start command (:mod:`.start`) installs, this
verifies. The agent runs it in a worker thread once it listens; it takes seconds (importing vLLM dominates).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from handlers.ports.pod_agent import SelfCheck, SelfCheckItem

from . import pins
from .bootstrap import BootstrapPaths

__all__ = ["BOOTSTRAP_LOG", "BOOTSTRAP_STATUS", "head_commit", "prime_rl_self_check"]

BOOTSTRAP_LOG = "bootstrap.log"  # under the bootstrap root: what the start command's bootstrap printed
BOOTSTRAP_STATUS = "bootstrap.status"  # its exit status, written by the start command
_PROBE = "import prime_rl, verifiers, vllm; print(vllm.__version__)"
_IMPORT_TIMEOUT_S = 600.0  # importing vLLM (and torch, CUDA) on a cold disk is slow, never this slow


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:240] if lines else ""


def _run(argv: list[str], timeout_s: float, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=dict(env) if env is not None else None
        )
    except subprocess.TimeoutExpired:
        return -1, "", f"timed out after {timeout_s:g} s"
    except OSError as exc:
        return -1, "", f"{type(exc).__name__}: {exc}"
    return proc.returncode, proc.stdout, proc.stderr


def _resolve_ref(gitdir: Path, ref: str) -> str:
    loose = gitdir / ref
    if loose.is_file():
        return loose.read_text().strip()
    packed = gitdir / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha.strip()
    return ""


def head_commit(checkout: Path) -> str:
    """The commit ``checkout`` has checked out, from its ``.git`` files (``git rev-parse HEAD`` as a fallback)."""
    dotgit = checkout / ".git"
    gitdir = dotgit
    if dotgit.is_file():  # a worktree or submodule: "gitdir: <path>"
        target = dotgit.read_text().strip().removeprefix("gitdir:").strip()
        gitdir = (checkout / target).resolve()
    head_file = gitdir / "HEAD"
    if head_file.is_file():
        head = head_file.read_text().strip()
        sha = _resolve_ref(gitdir, head.removeprefix("ref:").strip()) if head.startswith("ref:") else head
        if sha:
            return sha
    if shutil.which("git") is None or not checkout.is_dir():
        return ""
    code, out, _ = _run(["git", "-C", str(checkout), "rev-parse", "HEAD"], 30.0)
    return out.strip() if code == 0 else ""


def _bootstrap(root: Path) -> SelfCheckItem | None:
    status = root / BOOTSTRAP_STATUS
    if not status.is_file():
        return None  # the bootstrap did not run through the start command here (a prepared machine)
    code = status.read_text().strip()
    if code == "0":
        return SelfCheckItem(name="bootstrap", ok=True, detail="exit 0")
    try:
        tail = _last_line((root / BOOTSTRAP_LOG).read_text(errors="replace"))
    except OSError:
        tail = ""
    return SelfCheckItem(name="bootstrap", ok=False, detail=f"exit {code}: {tail or 'no log'} ({root / BOOTSTRAP_LOG})")


def _gpu(min_gpus: int, env: Mapping[str, str] | None) -> SelfCheckItem:
    path = (env or os.environ).get("PATH")
    exe = shutil.which("nvidia-smi", path=path)
    if exe is None:
        return SelfCheckItem(name="gpu", ok=False, detail="nvidia-smi not found: no NVIDIA driver on this machine")
    code, out, err = _run([exe, "-L"], 60.0, env)
    gpus = [line.strip() for line in out.splitlines() if line.startswith("GPU ")]
    if code != 0:
        return SelfCheckItem(name="gpu", ok=False, detail=f"nvidia-smi -L failed ({code}): {_last_line(err or out)}")
    if len(gpus) < min_gpus:
        return SelfCheckItem(name="gpu", ok=False, detail=f"{len(gpus)} GPU(s) visible, the trainer needs {min_gpus}")
    names = sorted({g.partition(":")[2].partition("(")[0].strip() for g in gpus})
    return SelfCheckItem(name="gpu", ok=True, detail=f"{len(gpus)} x {', '.join(names)}")


def _commit(paths: BootstrapPaths) -> SelfCheckItem:
    checkout = Path(paths.prime_rl)
    if not checkout.is_dir():
        return SelfCheckItem(name="prime_rl_commit", ok=False, detail=f"no prime-rl checkout at {checkout}")
    sha = head_commit(checkout)
    if sha != pins.PRIME_RL_COMMIT:
        found = sha[:12] or "no commit"
        return SelfCheckItem(
            name="prime_rl_commit", ok=False, detail=f"{found} checked out, pinned {pins.PRIME_RL_COMMIT[:12]}"
        )
    return SelfCheckItem(name="prime_rl_commit", ok=True, detail=f"{sha[:12]} ({pins.PRIME_RL_DESCRIBE})")


def _imports(paths: BootstrapPaths, env: Mapping[str, str] | None) -> list[SelfCheckItem]:
    python = Path(paths.prime_rl) / ".venv" / "bin" / "python"
    if not python.is_file():
        why = f"no venv at {python.parent.parent} (uv sync did not run)"
        return [
            SelfCheckItem(name="prime_rl_import", ok=False, detail=why),
            SelfCheckItem(name="vllm", ok=False, detail="not checked: prime-rl's venv is missing"),
        ]
    code, out, err = _run([str(python), "-c", _PROBE], _IMPORT_TIMEOUT_S, env)
    if code != 0:
        return [
            SelfCheckItem(name="prime_rl_import", ok=False, detail=_last_line(err or out) or f"exit {code}"),
            SelfCheckItem(name="vllm", ok=False, detail="not checked: the import failed"),
        ]
    version = _last_line(out)
    want = pins.VLLM_VERSION.partition("+")[0]
    ok = version.partition("+")[0] == want
    detail = version if ok else f"{version or 'no version'} installed, pinned {pins.VLLM_VERSION}"
    return [
        SelfCheckItem(name="prime_rl_import", ok=True, detail="prime_rl, verifiers, vllm"),
        SelfCheckItem(name="vllm", ok=ok, detail=detail),
    ]


def _scoring(paths: BootstrapPaths) -> SelfCheckItem:
    vf_eval = Path(paths.scoring_venv) / "bin" / "vf-eval"
    if not (vf_eval.is_file() and os.access(vf_eval, os.X_OK)):
        return SelfCheckItem(name="scoring", ok=False, detail=f"no executable {vf_eval} (the scoring venv)")
    return SelfCheckItem(name="scoring", ok=True, detail=f"{pins.SCORING_VERIFIERS} venv")


def _ait(expected: str) -> SelfCheckItem | None:
    if not expected:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        have = version("ai-trains-ai")
    except PackageNotFoundError:
        have = ""
    if have != expected:
        return SelfCheckItem(
            name="ait", ok=False, detail=f"{have or 'not installed'} here, the controller runs {expected}"
        )
    return SelfCheckItem(name="ait", ok=True, detail=have)


def prime_rl_self_check(
    root: str,
    *,
    min_gpus: int = 1,
    expected_ait: str = "",
    env: Mapping[str, str] | None = None,
) -> SelfCheck:
    """Every check above for the installs under ``root`` (the bootstrap root, ``/opt/ait`` on a pod)."""
    t0 = time.monotonic()
    paths = BootstrapPaths(root)
    items = [i for i in (_bootstrap(Path(root)), _ait(expected_ait)) if i is not None]
    items += [_gpu(min_gpus, env), _commit(paths), *_imports(paths, env), _scoring(paths)]
    state = "passed" if all(i.ok for i in items) else "failed"
    return SelfCheck(state=state, items=items, duration_s=round(time.monotonic() - t0, 3))
