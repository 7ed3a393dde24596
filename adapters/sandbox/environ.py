"""A scrubbed environment for the processes the engine starts that are not sandboxed (the local pod agent).

An allow-list by name prefix (paths, locale, Python, uv, Hugging Face, GPU stack, the project's own ``AIT_``
settings), and never a name that looks like a secret (``KEY``, ``TOKEN``, ``SECRET``, ``PASSW``,
``CREDENTIAL``, ``AUTH``): API keys for the outer loop's LLMs, Runpod, Tinker or W&B never reach a pod agent
or anything it starts. ``keep`` names variables passed on despite their name because they hold a path, not a
secret (``AIT_EVAL_KEY_FILE``: the trusted pod agent scores with the installation key; the agent code it
trains never sees the variable, see :mod:`adapters.sandbox.child`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from adapters.freed_memory import SETTING_VARS

__all__ = ["SECRET_NAME", "scrubbed_environ"]

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_PASS_PREFIXES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_",
    "TZ",
    "TMPDIR",
    "TERM",
    "NO_COLOR",
    "XDG_",
    "VIRTUAL_ENV",
    "PYTHON",
    "UV_",
    "PIP_",
    "HF_",
    "CUDA",
    "NVIDIA",
    "NCCL",
    "LD_LIBRARY_PATH",
    "TORCH",
    "TRITON",
    "VLLM",
    "OMP_",
    *SETTING_VARS,  # a user's choice of torch's huge pages and glibc's thresholds (adapters/freed_memory.py)
    "SSL_CERT",
    "AIT_",
)


def scrubbed_environ(
    extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None, keep: Iterable[str] = ()
) -> dict[str, str]:
    """``base`` (default ``os.environ``) reduced to the allow-list, plus ``keep`` as they are, plus ``extra``."""
    src = os.environ if base is None else base
    kept = set(keep)
    env = {k: v for k, v in src.items() if k in kept or (k.startswith(_PASS_PREFIXES) and not SECRET_NAME.search(k))}
    return env | dict(extra or {})
