"""The test-only tinker-cookbook venv and the offline Qwen3.5/3.6 tokenizer it builds, cached by content.

``.venv-cookbook/<key>/venv`` holds ``tinker-cookbook`` from ``requirements.lock`` (``--no-deps``; torch at the
main environment's own version, with the CUDA packages it came with where it is the registry's build, so never
the registry's CUDA stack on a machine that offers a CPU build) and
``.venv-cookbook/<key>/tokenizer`` the tokenizer built by ``fixtures/tokenizers/build_qwen3_6.py``. The key hashes
the lock, the builder and the template, so a change rebuilds it. ``.ci/run`` builds it before the tests (an
install step, like the main venv); the parity test builds it itself where it is missing:

    uv run python -m tests.adapters.tinker.cookbook.venv
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from importlib.metadata import distributions, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
HERE = Path(__file__).resolve().parent
LOCK = HERE / "requirements.lock"
BUILD = ROOT / "fixtures" / "tokenizers" / "build_qwen3_6.py"
TEMPLATE = ROOT / "fixtures" / "tokenizers" / "qwen3_6" / "chat_template.jinja"
_CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")  # torch's CUDA dependencies, as .ci/no_cuda.py names them


class CookbookVenvError(RuntimeError):
    """The venv could not be built: the message names the step, the command and its output."""


def run(cmd: list[str], what: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, input=stdin, check=False, timeout=1500)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CookbookVenvError(f"cookbook venv: {what} ({' '.join(cmd[:4])} ...) did not run: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-3000:]
        raise CookbookVenvError(f"cookbook venv: {what} failed (exit {done.returncode}): {tail}")
    return done.stdout


def venv_key() -> str:
    h = hashlib.sha256()
    for part in (LOCK.read_bytes(), BUILD.read_bytes(), TEMPLATE.read_bytes()):
        h.update(hashlib.sha256(part).digest())
    h.update(f"torch=={version('torch')} python{sys.version_info[:2]}".encode())
    return h.hexdigest()[:16]


def torch_stack() -> list[str]:
    """torch at this environment's version, after the CUDA packages this environment installed with it, at theirs.

    None where torch is the CPU build (CI); the registry's Linux torch (a user's ``uv sync``) cannot be imported
    without them (``libcudnn.so.9: cannot open shared object file``), and uv's cache already holds them.
    """
    cuda = sorted(
        f"{name}=={dist.version}"
        for dist in distributions()
        if (name := dist.metadata["Name"] or "").lower().startswith(_CUDA_PREFIXES)
    )
    return [*cuda, f"torch=={version('torch')}"]


def _build(dest: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        raise CookbookVenvError("cookbook venv: uv is not on PATH (CI installs it; `python -m pip install uv`)")
    env = dict(os.environ)
    if not env.get("UV_FIND_LINKS") and env.get("PIP_FIND_LINKS"):
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"]  # where this machine offers torch's CPU build
    # Bytecode at install, as .ci/run does for the main venv: where PYTHONDONTWRITEBYTECODE is set, the cookbook
    # side's torch + transformers import would otherwise compile from source in every test run.
    env.setdefault("UV_COMPILE_BYTECODE", "1")
    partial = dest.with_name(f"{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _fill(partial, uv, env)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # a failed build's 2 GB were once left behind, one per try
        raise
    try:
        partial.rename(dest)
    except OSError:  # another process finished the same build first
        shutil.rmtree(partial, ignore_errors=True)
    if not (dest / "tokenizer" / "tokenizer.json").is_file():
        raise CookbookVenvError(f"cookbook venv: {dest} has no tokenizer after the build")


def _fill(partial: Path, uv: str, env: dict[str, str]) -> None:
    py = partial / "venv" / "bin" / "python"
    run([uv, "venv", "--quiet", "--python", sys.executable, str(partial / "venv")], "uv venv", env)
    run([uv, "pip", "install", "--quiet", "--python", str(py), "--no-deps", "-r", str(LOCK)], "uv pip install", env)
    # torch as this environment has it: its CPU build here, never the registry's CUDA stack where there is one.
    torch = torch_stack()
    run([uv, "pip", "install", "--quiet", "--python", str(py), "--no-deps", *torch], f"installing {torch[-1]}", env)
    probes = sorted((ROOT / "fixtures" / "trajectories").glob("*.json")) + sorted(
        (ROOT / "examples" / "tasks").glob("*_v1_fast.json")
    )
    run([str(py), str(BUILD), str(partial / "tokenizer"), *map(str, probes)], "building the Qwen3.6 tokenizer", env)


def ensure() -> Path:
    """The cached venv for the current lock, built (and older ones removed) when it is missing."""
    dest = ROOT / ".venv-cookbook" / venv_key()
    if not (dest / "tokenizer" / "tokenizer.json").is_file():
        dest.parent.mkdir(exist_ok=True)
        for stale in dest.parent.iterdir():  # venvs of an older lock, builder or template (~1.3 GB each)
            if stale.is_dir() and not stale.name.startswith(f"{dest.name}.partial"):
                shutil.rmtree(stale, ignore_errors=True)
        _build(dest)
    return dest


if __name__ == "__main__":
    try:
        print(f"cookbook venv ready: {ensure()}")
    except CookbookVenvError as exc:
        sys.stderr.write(f"{exc}\n")
        raise SystemExit(1) from None
